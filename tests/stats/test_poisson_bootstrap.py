"""The Poisson bootstrap (``stats.bootstrap: poisson``): weights that follow the example ids, the
same intervals whatever the order, the chunks or the blocks, and oracles: the classic bootstrap on
10k examples, and the coverage of a known mean."""

import math

import numpy as np
import pandas as pd
from sklearn.metrics import f1_score
import pytest

from ragmem.metrics.base import weighted_max, weighted_mean, weighted_percentile, WeightedSample
from ragmem.stats import intervals as stats

NAMES = ["accuracy", "precision", "f1", "avg_coverage", "avg_latency", "latency_p50", "latency_p95", "latency_max"]


def _table(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    latency = rng.exponential(1.0, n)
    latency[rng.random(n) < 0.05] = np.nan  # some calls not timed
    coverage = rng.random(n)
    coverage[rng.random(n) < 0.05] = np.nan  # some not computable
    return pd.DataFrame({"id": [f"q{i}" for i in range(n)], "error": [None] * n, "coverage": coverage,
                         "label": rng.integers(0, 2, n), "verdict": rng.integers(0, 2, n), "latency_s": latency})


def test_the_weights_are_poisson_one_and_follow_the_ids_not_their_place():
    keys = stats.example_keys([f"q{i}" for i in range(2000)])
    weights = stats.poisson_weights(keys, 0, 500, seed=7)
    freq = np.bincount(weights.astype(int).ravel(), minlength=6)[:6] / weights.size
    pmf = np.array([math.exp(-1) / math.factorial(k) for k in range(6)])
    np.testing.assert_allclose(freq, pmf, atol=0.002)  # 1M draws: the standard error is < 0.0005
    assert weights.mean() == pytest.approx(1.0, abs=0.005) and weights.var() == pytest.approx(1.0, abs=0.01)
    # an example's weights depend on its id, the seed and the resample's number only
    order = np.random.default_rng(0).permutation(2000)
    np.testing.assert_array_equal(stats.poisson_weights(keys[order], 0, 500, 7), weights[:, order])
    np.testing.assert_array_equal(stats.poisson_weights(keys[300:310], 0, 500, 7), weights[:, 300:310])
    np.testing.assert_array_equal(stats.poisson_weights(keys, 123, 77, 7), weights[123:200])
    assert not np.array_equal(stats.poisson_weights(keys, 0, 500, 8), weights)
    # neighbouring resamples and examples are uncorrelated
    assert abs(np.corrcoef(weights[0], weights[1])[0, 1]) < 0.1
    assert abs(np.corrcoef(weights[:, 0], weights[:, 1])[0, 1]) < 0.15


def test_weighted_statistics_equal_numpy_on_the_repeated_values():
    rng = np.random.default_rng(3)
    values = np.sort(rng.exponential(1.0, 40))
    weights = rng.poisson(1.0, (300, 40))
    weights[0] = 0  # an empty resample
    multisets = [np.repeat(values, w) for w in weights]
    sample = WeightedSample(values, weights.astype(float))
    for q in (0, 1, 50, 95, 99, 100):
        expected = [np.percentile(m, q) if m.size else np.nan for m in multisets]
        np.testing.assert_array_equal(weighted_percentile(q)(sample), expected)
    np.testing.assert_array_equal(weighted_max(sample), [m.max() if m.size else np.nan for m in multisets])
    np.testing.assert_allclose(weighted_mean(sample), [m.mean() if m.size else np.nan for m in multisets],
                               rtol=1e-12)
    empty = WeightedSample(np.array([]), np.zeros((3, 0)))  # nothing measured
    assert np.isnan(weighted_percentile(50)(empty)).all() and np.isnan(weighted_max(empty)).all()


def test_each_resample_is_the_metric_of_its_weighted_examples_in_any_block_size(monkeypatch):
    """Sum-kind metrics as ``weights @ data``, percentiles on the weighted values: the same numbers
    as the metric of each resample's multiset of examples, built by repeating each row."""
    n, resamples = 80, 120
    table = _table(n)
    keys = stats.example_keys(table["id"])
    weights = stats.poisson_weights(keys, 0, resamples, 5).astype(int)
    aggs = stats.aggregators(table, NAMES)
    one_block = stats.resample_all(aggs, n, resamples, 5, keys)
    monkeypatch.setattr(stats, "_BLOCK_ELEMENTS", 7 * n)  # 7 resamples a block, the last one short
    many_blocks = stats.resample_all(aggs, n, resamples, 5, keys)
    for name, agg in aggs.items():
        repeated = [np.repeat(np.arange(n), w) for w in weights]
        expected = [np.nan if (v := agg.with_data(agg.data[rows]).value()) is None else v for rows in repeated]
        np.testing.assert_allclose(one_block[name], expected, rtol=1e-12, equal_nan=True, err_msg=name)
        # BLAS sums a block of another shape in another order: equal to the last bits only
        np.testing.assert_allclose(many_blocks[name], one_block[name], rtol=1e-12, equal_nan=True, err_msg=name)


def test_intervals_do_not_depend_on_the_examples_order():
    table = _table(3000, seed=1)
    shuffled = table.sample(frac=1.0, random_state=4).reset_index(drop=True)
    first = stats.bootstrap(stats.aggregators(table, NAMES), 3000, 400, 2, keys=stats.example_keys(table["id"]))
    second = stats.bootstrap(stats.aggregators(shuffled, NAMES), 3000, 400, 2, keys=stats.example_keys(shuffled["id"]))
    for name in NAMES:  # the sums are added in another order: equal to the last bits only
        np.testing.assert_allclose(first[name], second[name], rtol=1e-12, atol=1e-15, err_msg=name)


def test_on_10k_examples_the_intervals_are_within_0_01_of_the_classic_bootstrap():
    """Oracle: the classic bootstrap (index vectors with replacement) on the same 10k examples."""
    n = 10_000
    table = _table(n, seed=2)
    classic = stats.bootstrap(stats.aggregators(table, NAMES), n, 1000, 0)
    poisson = stats.bootstrap(stats.aggregators(table, NAMES), n, 1000, 0, keys=stats.example_keys(table["id"]))
    for name in NAMES:
        if name == "latency_max":  # the largest value's interval: the top order statistics, in both
            assert poisson[name][1] == classic[name][1] == np.nanmax(table["latency_s"])
            continue
        assert poisson[name] == pytest.approx(classic[name], abs=0.01), name


def test_the_interval_of_a_mean_covers_the_true_mean_at_its_level():
    """A known truth: 300 samples of 150 draws from Beta(2, 5) (mean 2/7); the 90% Poisson-bootstrap
    interval of the mean covers 2/7 in 90% of them, within the binomial error of 300 trials."""
    rng = np.random.default_rng(11)
    covered = 0
    for trial in range(300):
        values = rng.beta(2, 5, 150)
        table = pd.DataFrame({"id": [f"t{trial}-{i}" for i in range(150)], "error": None, "coverage": values})
        aggs = stats.aggregators(table, ["avg_coverage"])
        low, high = stats.bootstrap(aggs, 150, 400, trial, 0.90, keys=stats.example_keys(table["id"]))["avg_coverage"]
        covered += low <= 2 / 7 <= high
    assert 0.90 - 3 * math.sqrt(0.09 / 300) <= covered / 300 <= 0.90 + 3 * math.sqrt(0.09 / 300) + 0.01


def test_paired_on_the_same_ids_draws_the_same_weights_in_both_runs():
    rng = np.random.default_rng(0)
    a_values = rng.random(200)
    ids = [f"q{i}" for i in range(200)]
    keys = stats.example_keys(ids)

    def agg(values):
        table = pd.DataFrame({"id": ids, "error": None, "coverage": values})
        return stats.aggregators(table, ["avg_coverage"])["avg_coverage"]
    same = stats.paired("avg_coverage", agg(a_values), agg(a_values), 500, 0, keys=keys)
    assert same.diff == 0 and same.ci == (0.0, 0.0) and same.p_value == 1.0
    better = stats.paired("avg_coverage", agg(a_values), agg(np.clip(a_values + 0.05, 0, 1)), 500, 0, keys=keys)
    assert better.diff > 0.04 and better.ci[0] > 0 and better.p_value < 0.01
    noise = stats.paired("avg_coverage", agg(a_values), agg(rng.permutation(a_values)), 500, 0, keys=keys)
    assert noise.ci[0] < noise.diff < noise.ci[1] and noise.ci[0] < 0 < noise.ci[1]


def test_relabel_keeps_the_classic_bootstrap_of_runs_logged_before_the_poisson_one():
    from ragmem.run.relabel import _settings

    assert _settings({"stats.signature": "bootstrap:1000|conf:0.95|seed:0"}).method == "classic"
    assert _settings({"stats.signature": "bootstrap:1000|conf:0.95|seed:0|method:poisson"}).method == "poisson"


def test_the_table_of_weights_gives_the_binary_search_s_weights():
    """Oracle: Poisson(1)'s thresholds searched for every draw, at and beside each threshold too."""
    thresholds = stats._POISSON_CDF32.astype(np.int64)
    beside = np.clip(np.concatenate([thresholds + d for d in (-2, -1, 0, 1, 2)]), 0, 2 ** 32 - 1)
    draws = np.concatenate([beside, np.random.default_rng(0).integers(0, 2 ** 32, 2_000_000)]).astype(np.uint32)
    np.testing.assert_array_equal(stats._poisson_of(draws), np.searchsorted(stats._POISSON_CDF32, draws, side="right"))


def test_the_swaps_of_the_randomization_test_follow_the_ids_too():
    keys = stats.example_keys([f"q{i}" for i in range(500)])
    drawn = stats.swaps(keys, 0, 1000, seed=3)
    assert drawn.shape == (1000, 500) and drawn.mean() == pytest.approx(0.5, abs=0.005)
    np.testing.assert_array_equal(stats.swaps(keys[::-1], 0, 1000, 3), drawn[:, ::-1])
    np.testing.assert_array_equal(stats.swaps(keys, 70, 200, 3), drawn[70:270])  # any block, any start
    assert abs(np.corrcoef(drawn[:, 0], stats.poisson_weights(keys, 0, 1000, 3)[:, 0])[0, 1]) < 0.1


def _f1(t) -> float:
    """F1 of the verdicts against the labels, 2·TP / (2·TP + FP + FN) (scikit-learn's, checked below)."""
    label, verdict = np.asarray(t["label"]), np.asarray(t["verdict"])
    tp, fp, fn = ((label == 1) & (verdict == 1)).sum(), ((label == 0) & (verdict == 1)).sum(), ((label == 1) & (verdict == 0)).sum()
    return float(2 * tp / (2 * tp + fp + fn)) if tp + fp + fn else 0.0


#: each metric as its definition, on the columns of a table (independent of ragmem's aggregators):
#: the mean of the computable coverages, the F1 of the verdicts against the labels, and numpy's
#: linear-interpolation 95th percentile of the timed calls
_DEFINITIONS = {
    "avg_coverage": lambda t: float(np.nanmean(np.asarray(t["coverage"], dtype=float))),
    "f1": _f1,
    "latency_p95": lambda t: float(np.nanpercentile(np.asarray(t["latency_s"], dtype=float), 95)),
}


@pytest.mark.parametrize("metric", ["avg_coverage", "f1", "latency_p95"])
def test_the_randomization_p_value_as_sums_equals_swapping_the_examples_one_permutation_at_a_time(metric):
    """Oracle: each permutation's two tables rebuilt row by row with pandas, the same swaps (the
    ids' stream, :func:`stats.swaps`), and the metric computed from its definition on them (the
    mean, scikit-learn's F1, numpy's percentile), never with ragmem's aggregators."""
    n = 150
    table_a, table_b = _table(n, seed=1), _table(n, seed=2)
    table_b["coverage"] = table_a["coverage"] + 0.03  # a small real difference, and noise elsewhere
    a, b = stats.aggregators(table_a, [metric])[metric], stats.aggregators(table_b, [metric])[metric]
    keys = stats.example_keys(table_a["id"])
    define = _DEFINITIONS[metric]
    for table in (table_a, table_b):  # the hand F1 is scikit-learn's
        assert _f1(table) == pytest.approx(f1_score(table["label"], table["verdict"], zero_division=0), abs=1e-15)
    diff = define(table_b) - define(table_a)
    assert b.value() - a.value() == pytest.approx(diff, abs=1e-12)
    p = stats.randomization_p(a, b, b.value() - a.value(), 400, 9, keys)
    extreme = 0
    columns_a = {c: table_a[c].to_numpy() for c in ("coverage", "label", "verdict", "latency_s")}
    columns_b = {c: table_b[c].to_numpy() for c in columns_a}
    for swap in stats.swaps(keys, 0, 400, 9):  # the swapped examples' rows trade places
        a_star = {c: np.where(swap, columns_b[c], columns_a[c]) for c in columns_a}
        b_star = {c: np.where(swap, columns_a[c], columns_b[c]) for c in columns_a}
        extreme += abs(define(b_star) - define(a_star)) >= abs(diff) - 1e-12
    assert p == (1 + extreme) / (1 + 400)
