"""The judge's reliability estimators against their oracles (ppi-python's ``ppi_mean_ci``,
statsmodels' ``fleiss_kappa``) and against a simulation with a known truth: 2,000 synthetic runs per
judge, each of 2,000 examples with 200 labelled, a good judge and a poor one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragmem.metrics.estimators import binary_kappa, fleiss_kappa, ppi_mean_ci


def _dataset(rng, n, big_n):
    p = rng.uniform(0.1, 0.9)
    sensitivity, specificity = rng.uniform(0.5, 1.0), rng.uniform(0.5, 1.0)
    truth = rng.random(n + big_n) < p
    judged = np.where(truth, rng.random(n + big_n) < sensitivity, rng.random(n + big_n) >= specificity)
    return truth[:n].astype(float), judged[:n].astype(float), judged[n:].astype(float)


def test_the_ppi_interval_is_ppi_pythons_on_50_random_datasets():
    ppi_py = pytest.importorskip("ppi_py", reason="ppi-python (the test extra) is the oracle")
    rng = np.random.default_rng(7)
    for _ in range(50):
        n, big_n = int(rng.integers(20, 400)), int(rng.integers(50, 4000))
        y, yhat, yhat_u = _dataset(rng, n, big_n)
        ours = ppi_mean_ci(y, yhat, yhat_u, confidence=0.95)
        low, high = ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05)
        point = ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u)
        assert ours.low == pytest.approx(float(np.squeeze(low)), abs=1e-9)
        assert ours.high == pytest.approx(float(np.squeeze(high)), abs=1e-9)
        assert ours.estimate == pytest.approx(float(np.squeeze(point)), abs=1e-9)
        for lam in (0.0, 1.0):  # the labels alone, plain PPI
            fixed = ppi_mean_ci(y, yhat, yhat_u, lam=lam)
            low, high = ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, lam=lam)
            assert (fixed.low, fixed.high) == pytest.approx((float(np.squeeze(low)), float(np.squeeze(high))), abs=1e-9)


def test_fleiss_kappa_is_statsmodels_on_50_random_tables():
    inter_rater = pytest.importorskip("statsmodels.stats.inter_rater", reason="statsmodels (the test extra) is the oracle")
    rng = np.random.default_rng(11)
    for _ in range(50):
        items, raters, categories = int(rng.integers(2, 300)), int(rng.integers(2, 8)), int(rng.integers(2, 4))
        table = np.stack([rng.multinomial(raters, rng.dirichlet(np.ones(categories))) for _ in range(items)])
        ours = fleiss_kappa(table)
        theirs = inter_rater.fleiss_kappa(table, method="fleiss")
        if ours is None:
            assert not math.isfinite(theirs) or theirs == pytest.approx(0.0)
        else:
            assert ours == pytest.approx(theirs, abs=1e-9)


def test_cohens_kappa_is_scikit_learns_on_300_random_label_sets():
    sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn (the test extra) is the oracle")
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(2, 60))
        labels, verdicts = rng.integers(0, 2, n), rng.integers(0, 2, n)
        counts = [int(np.sum((labels == a) & (verdicts == b))) for a, b in ((1, 1), (1, 0), (0, 1), (0, 0))]
        ours = binary_kappa(*counts)
        if len(set(labels) | set(verdicts)) < 2:
            assert ours is None
            continue
        assert ours == pytest.approx(sklearn_metrics.cohen_kappa_score(labels, verdicts), abs=1e-9)


def test_bad_inputs_are_refused_and_undefined_is_none():
    with pytest.raises(ValueError, match="same length"):
        ppi_mean_ci([1, 0, 1], [1, 0], [1])
    with pytest.raises(ValueError, match="at least 2 labelled"):
        ppi_mean_ci([1], [1], [1, 0])
    with pytest.raises(ValueError, match="same number of samples"):
        fleiss_kappa([[2, 0], [1, 2]])
    assert fleiss_kappa([[5, 0], [5, 0], [5, 0]]) is None  # one category only: undefined, not 0
    assert fleiss_kappa([[5, 0], [0, 5]]) == 1.0


RUNS, EXAMPLES, LABELLED = 2000, 2000, 200
JUDGES = {"good": (0.95, 0.90), "poor": (0.90, 0.70)}


def simulate(sensitivity: float, specificity: float, seed: int) -> dict[str, float]:
    """Coverage and widths over RUNS synthetic runs with a known true pass rate (drawn in [0.2, 0.5])."""
    rng = np.random.default_rng(seed)
    z = 1.959963984540054
    covered_ppi = covered_judge = narrower = 0
    for _ in range(RUNS):
        p = rng.uniform(0.2, 0.5)
        truth = rng.random(EXAMPLES) < p
        judged = np.where(truth, rng.random(EXAMPLES) < sensitivity, rng.random(EXAMPLES) >= specificity).astype(float)
        y, yhat, yhat_u = truth[:LABELLED].astype(float), judged[:LABELLED], judged[LABELLED:]
        ppi = ppi_mean_ci(y, yhat, yhat_u)
        covered_ppi += ppi.low <= p <= ppi.high
        judge_se = judged.std() / math.sqrt(EXAMPLES)  # the judge alone, as if it were never wrong
        covered_judge += abs(judged.mean() - p) <= z * judge_se
        labels_width = 2 * z * y.std() / math.sqrt(LABELLED)  # the 200 labels alone
        narrower += (ppi.high - ppi.low) < labels_width
    return {"ppi_coverage": float(covered_ppi / RUNS), "judge_only_coverage": float(covered_judge / RUNS),
            "ppi_narrower_than_labels": float(narrower / RUNS)}


@pytest.mark.parametrize("judge", JUDGES)
def test_the_ppi_interval_covers_the_true_rate_and_the_judge_alone_does_not(judge):
    figures = simulate(*JUDGES[judge], seed=2026 + len(judge))
    print(f"{judge} judge {JUDGES[judge]}: {figures}")
    assert figures["ppi_coverage"] >= 0.93
    if judge == "poor":
        assert figures["judge_only_coverage"] < 0.20
    else:
        assert figures["ppi_narrower_than_labels"] >= 0.90


# ---- the reliability family on a run's table ------------------------------------------------------

class _Ctx:
    judge = None
    confidence = 0.95


def _table(labels, verdicts):
    import pandas as pd

    return pd.DataFrame({"label": pd.array(labels, dtype="Int64"), "verdict": pd.array(verdicts, dtype="Int64"),
                         "error": [None] * len(labels)})


def _small_sample(y, yhat, yhat_u, lam, confidence=0.95):
    """PPI's interval with the labels' variance divided by n - 1 and Student's t on n - 1 degrees of
    freedom (ragmem.metrics.estimators.pass_rate_ppi), written out with numpy and scipy.stats."""
    from scipy import stats as scipy_stats

    n, big_n = len(y), len(yhat_u)
    estimate = lam * yhat_u.mean() + np.mean(y - lam * yhat)
    se = np.sqrt(lam ** 2 * np.var(yhat_u) / big_n + np.var(y - lam * yhat, ddof=1) / n)
    t = scipy_stats.t.ppf((1 + confidence) / 2, n - 1)
    return max(0.0, estimate - t * se), min(1.0, estimate + t * se)


def test_pass_rate_ppi_of_a_run_is_ppi_pythons_estimate_with_a_small_sample_interval_on_50_random_tables():
    """The run's path (a results table, some rows labelled, through the reliability family) gives
    ppi-python's estimate to 1e-12 and, from the same sums without the correction, its interval to
    1e-9; the run's interval is the small-sample one (labels' variance over n - 1, Student's t),
    cut at [0, 1] (the range of a pass rate), and holds ppi-python's inside it."""
    ppi_py = pytest.importorskip("ppi_py", reason="ppi-python (the test extra) is the oracle")
    from ragmem.metrics import reliability
    from ragmem.metrics.estimators import ppi_from_sums, ppi_statistics

    rng = np.random.default_rng(21)
    for _ in range(50):
        n, big_n = int(rng.integers(10, 200)), int(rng.integers(20, 800))
        y, yhat, yhat_u = _dataset(rng, n, big_n)
        table = _table([int(v) for v in y] + [None] * big_n, [int(v) for v in np.concatenate([yhat, yhat_u])])
        result = reliability.compute(table, _Ctx(), reliability.NAMES)
        low, high = (float(np.squeeze(v)) for v in ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05))
        labelled = np.r_[[True] * n, [False] * big_n]
        plain = ppi_from_sums(ppi_statistics(np.r_[y, np.zeros(big_n)], np.r_[yhat, yhat_u], labelled, ~labelled).sum(axis=0))
        assert (plain.low, plain.high) == pytest.approx((low, high), abs=1e-9)
        assert result.values["pass_rate_ppi"] == pytest.approx(float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u))), abs=1e-9)
        expected = _small_sample(y, yhat, yhat_u, plain.lam)
        assert result.ci["pass_rate_ppi"] == pytest.approx(expected, abs=1e-9)
        assert result.ci["pass_rate_ppi"][0] <= max(0.0, low) + 1e-12 and result.ci["pass_rate_ppi"][1] >= min(1.0, high) - 1e-12
        assert result.ci["answer_correctness_ppi"] == result.ci["pass_rate_ppi"]
        assert result.values["n_labelled"] == n
        assert result.values["judge_label_kappa"] == pytest.approx(binary_kappa(
            *(float(np.sum((y == a) & (yhat == b))) for a, b in ((1, 1), (1, 0), (0, 1), (0, 0)))), abs=1e-12)


def test_the_ppi_interval_of_a_pass_rate_near_1_stops_at_1():
    """19 of 20 labels pass, the judge passes 48 of 50 unlabelled: ppi-python's normal interval
    reaches 1.0455; the run's pass_rate_ppi stops at 1, its lower end the small-sample one and the
    estimate unchanged."""
    ppi_py = pytest.importorskip("ppi_py", reason="ppi-python (the test extra) is the oracle")
    from ragmem.metrics import reliability

    y, yhat = np.array([1.0] * 19 + [0.0]), np.array([1.0] * 17 + [0.0, 1.0, 1.0])
    yhat_u = np.array([1.0] * 48 + [0.0] * 2)
    low, high = (float(np.squeeze(v)) for v in ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05))
    assert high > 1.04
    table = _table([int(v) for v in y] + [None] * 50, [int(v) for v in np.concatenate([yhat, yhat_u])])
    result = reliability.compute(table, _Ctx(), reliability.NAMES)
    from ragmem.metrics.estimators import ppi_mean_ci

    expected = _small_sample(y, yhat, yhat_u, ppi_mean_ci(y, yhat, yhat_u).lam)
    assert expected[0] < low and result.ci["pass_rate_ppi"] == pytest.approx((expected[0], 1.0), abs=1e-9)
    assert result.values["pass_rate_ppi"] == pytest.approx(float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u))))


def test_a_judge_that_passes_everything_is_flagged_and_its_kappa_interval_is_bootstrapped():
    from ragmem.stats import intervals as stats
    from ragmem.metrics import reliability

    table = _table([1, 0] * 8, [1] * 16)  # says yes to all 16: the SmolLM2 case
    result = reliability.compute(table, _Ctx(), reliability.NAMES)
    assert result.values["judge_label_kappa"] == 0.0 and result.values["judge_sensitivity"] == 1.0
    assert result.values["judge_specificity"] == 0.0 and result.values["judge_label_agreement"] == 0.5
    aggs = reliability.aggregators(table, ["judge_label_kappa", "judge_specificity"], 0.0)
    ci = stats.bootstrap(aggs, len(table), 500, seed=0)
    assert ci["judge_label_kappa"] == (0.0, 0.0)
    line = reliability.unreliable(result.values, ci, 0.4)
    assert line.startswith("judge unreliable: Cohen kappa with the labels 0.000 [0.000, 0.000] on 16 labelled")
    assert reliability.unreliable(result.values, ci, -0.5) is None  # judge.min_kappa moves the bar
    good = _table([1, 0] * 20, [1, 0] * 20)
    assert reliability.unreliable(reliability.compute(good, _Ctx(), reliability.NAMES).values,
                                  stats.bootstrap(reliability.aggregators(good, ["judge_label_kappa"], 0.0), 40, 200), 0.4) is None


def test_the_reliability_figures_are_logged_under_judge_and_read_back_by_name():
    from ragmem.tracking.lifecycle import metric_key, metric_name

    for name, key in (("judge_label_kappa", "judge/label_kappa"), ("judge_flip_rate", "judge/flip_rate"),
                      ("judge_label_kappa_ci_low", "judge/label_kappa_ci_low"), ("pass_rate_ppi", "pass_rate_ppi"),
                      ("n_labelled", "count/n_labelled"), ("judge_calls", "usage/judge_calls")):
        assert metric_key(name) == key and metric_name(key) == name
    assert metric_key("judge_score") == "judge_score"  # LoCoMo's J score is not the judge's reliability
