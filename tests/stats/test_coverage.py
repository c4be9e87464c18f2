"""The oracle of every interval, small: ``benchmarks/bench_coverage.py``'s simulation (datasets with a
known truth, ragmem's own interval code) at a fixed seed. 300 datasets a family at n = 100: a
coverage's standard error is about 0.013, so [0.91, 0.985] is about three of them around 0.95; and the
same clustered data resampled as examples must fall short, or the test could not fail."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_coverage.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_coverage", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_coverage"] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("bench_coverage", None)


@pytest.mark.parametrize("name", ["mean 0/1", "ratio (precision)", "p95 latency", "paired diff", "PPI (1/3 labelled)",
                                  "clustered, 30 clusters"])
def test_a_95_percent_interval_holds_the_truth_about_95_percent_of_the_time(bench, name):
    family = next(f for f in bench.FAMILIES if f.name == name)
    share, counted, _ = bench.coverage(family, 100 if family.clusters is None else 120, 300, 400, seed=7)
    assert counted == 300 and 0.91 <= share <= 0.985, (name, share)


def test_clustered_data_resampled_as_examples_falls_short(bench):
    family = next(f for f in bench.FAMILIES if f.name == "clustered (30) as examples")
    share, _, _ = bench.coverage(family, 300, 300, 400, seed=7)
    assert share < 0.85, share


def test_a_percentiles_interval_is_the_pair_of_order_statistics_scipys_binomial_puts_nearest_the_tails():
    import numpy as np
    from scipy import stats as scipy_stats

    from ragmem.stats.intervals import quantile_interval

    values = np.random.default_rng(3).lognormal(0.0, 0.5, 200)
    ordered = np.sort(values)
    for q in (0.5, 0.95, 0.99):
        cdf = scipy_stats.binom.cdf(np.arange(201), 200, q)  # B(k - 1) of the ranks k = 1..201
        low, high = (int(np.argmin(np.abs(cdf - t))) + 1 for t in (0.025, 0.975))
        assert quantile_interval(values, q) == (ordered[low - 1], ordered[min(high, 200) - 1])
        exact = cdf[min(high, 200) - 1] - cdf[low - 1]  # its coverage, whatever the distribution
        if high <= 200:
            assert 0.93 <= exact <= 0.97
        else:  # a p99 of 200 values: the largest is the upper end, and it covers less (the docstring says so)
            assert q == 0.99 and exact < 0.9
    assert quantile_interval(np.array([np.nan]), 0.5) is None
