"""The unpaired comparison of two windows of traffic (different examples: two samples, not pairs),
held against a simulation with a known difference and against Welch's t-test (scipy)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.stats as st

from ragmem.stats.paired_runs import unpaired_rows


def _table(prefix: str, verdicts: np.ndarray, latency: np.ndarray | None = None) -> pd.DataFrame:
    table = pd.DataFrame({"id": [f"{prefix}-{i}" for i in range(len(verdicts))],
                          "verdict": pd.array(verdicts.astype(int), dtype="Int64"), "error": None, "judge_error": None,
                          "label": pd.array([None] * len(verdicts), dtype="Int64")})
    return table if latency is None else table.assign(latency_s=latency)


def test_the_interval_covers_the_true_difference_and_the_p_value_agrees_with_welch():
    rng = np.random.default_rng(11)
    covered, p_values = 0, []
    sims = 80
    for s in range(sims):
        a, b = rng.random(200) < 0.7, rng.random(160) < 0.6  # true difference -0.1
        row = unpaired_rows(_table(f"a{s}", a), _table(f"b{s}", b), ["pass_rate"], float("nan"), None, 500, s)[0]
        assert row["diff"] == b.mean() - a.mean() and (row["n_a"], row["n_b"]) == (200, 160)
        covered += row["ci_low"] <= -0.1 <= row["ci_high"]
        p_values.append((row["p_value"], st.ttest_ind(b, a, equal_var=False).pvalue))
    assert covered / sims >= 0.87  # 95% nominal; 80 simulations (a binomial's sd is 0.024)
    ours, welch = np.array(p_values).T
    assert np.corrcoef(ours, welch)[0, 1] > 0.97
    assert np.median(np.abs(ours - welch)) < 0.03


def test_two_runs_sharing_no_example_are_still_compared_and_an_undefined_metric_is_null():
    a = _table("a", np.array([1, 1, 0, 1]))
    b = _table("b", np.array([0, 0, 1, 0]))
    row = unpaired_rows(a, b, ["pass_rate"], float("nan"), None, 200, 0)[0]
    assert row["diff"] == -0.5 and row["ci_low"] <= -0.5 <= row["ci_high"]
    empty = b.assign(verdict=pd.array([None] * 4, dtype="Int64"))
    none = unpaired_rows(a, empty, ["pass_rate"], float("nan"), None, 200, 0)
    assert none == [] or none[0]["diff"] is None


def test_a_latency_percentile_of_two_windows_covers_the_true_difference():
    """Exponential latencies with scales 1.0 and 1.5: the true difference of their p95 is
    0.5 * ln(20); each window's values resampled on their own."""
    rng = np.random.default_rng(3)
    truth, covered, sims = 0.5 * np.log(20), 0, 60
    for s in range(sims):
        a, b = rng.exponential(1.0, 400), rng.exponential(1.5, 300)
        rows = unpaired_rows(_table(f"a{s}", np.ones(400), a), _table(f"b{s}", np.ones(300), b), ["latency_p95"],
                             float("nan"), None, 500, s)
        (row,) = rows
        assert row["diff"] == pytest.approx(np.quantile(b, 0.95) - np.quantile(a, 0.95), rel=0.05)
        covered += row["ci_low"] <= truth <= row["ci_high"]
    assert covered / sims >= 0.87
