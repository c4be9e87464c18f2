"""The judge's reliability estimators against their oracles (ppi-python's ``ppi_mean_ci``,
statsmodels' ``fleiss_kappa``) and against a simulation with a known truth: 2,000 synthetic runs per
judge, each of 2,000 examples with 200 labelled, a good judge and a poor one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragmem.metrics.reliability import fleiss_kappa, ppi_mean_ci


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
