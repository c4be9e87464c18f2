"""``ragmem compare A B`` tests every metric at once: Holm's correction over them, enough permutations
for it, and the smallest difference each comparison could have detected.

Oracles: statsmodels' ``multipletests`` (Holm) for the adjusted p-values, a simulation whose null
metrics are known to be null, and the normal theory's detectable difference for data of known spread.
"""

from __future__ import annotations

from statistics import NormalDist
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from ragmem.metrics.base import mean_aggregator
from ragmem.report import terminal
from ragmem.stats import intervals as stats
from ragmem.stats.multiplicity import min_detectable, permutations_for
from ragmem.tracking.compare import compare_tables

N_NULL, N = 50, 400


def _run(run_id: str) -> SimpleNamespace:
    return SimpleNamespace(info=SimpleNamespace(run_id=run_id),
                           data=SimpleNamespace(params={"zero_division": "0"}, metrics={}, tags={}))


def _tables(seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two runs' per-example tables: 50 rubric scores drawn alike for A and B (null by construction)
    and one, ``rubric_real``, that B passes 75% of the time against A's 50%."""
    rng = np.random.default_rng(seed)
    ids = [f"q{i}" for i in range(N)]
    a, b = {"id": ids}, {"id": ids}
    for k in range(N_NULL):
        a[f"rubric_null{k}"] = rng.integers(0, 2, N).astype(float)
        b[f"rubric_null{k}"] = rng.integers(0, 2, N).astype(float)
    a["rubric_real"] = (rng.random(N) < 0.5).astype(float)
    b["rubric_real"] = (rng.random(N) < 0.75).astype(float)
    first, second = pd.DataFrame(a), pd.DataFrame(b)
    first.attrs["run"], second.attrs["run"] = _run("a" * 32), _run("b" * 32)
    return first, second


def test_fifty_null_metrics_and_one_real_difference_mark_the_one(capsys):
    a, b = _tables(seed=3)
    names = [f"rubric_null{k}" for k in range(N_NULL)] + ["rubric_real"]
    result = compare_tables(a, b, names, resamples=1000, seed=0)
    rows = {r["metric"]: r for r in result["metrics"]}
    # the metrics below 0.05 before the correction were tested again with 10 m / 0.05 permutations
    assert len(rows) == N_NULL + 1 and result["permutations"] == permutations_for(51, 0.05, 1000) == 10200
    assert {r["permutations"] for r in rows.values() if r["p_value"] >= 0.05} == {1000}
    assert rows["rubric_real"]["permutations"] == 10200 and rows["rubric_real"]["p_value"] == 1 / 10201
    # uncorrected, noise alone passes p < 0.05 on some of the 50 null metrics (2.5 expected); Holm's
    # correction marks the real difference and nothing else
    assert sum(rows[n]["p_value"] < 0.05 for n in names[:-1]) >= 1
    assert [n for n, r in rows.items() if r["marked"]] == ["rubric_real"]
    assert rows["rubric_real"]["p_holm"] < 0.05 < min(rows[n]["p_holm"] for n in names[:-1])
    # the adjusted p-values are statsmodels' Holm on the same p-values
    multitest = pytest.importorskip("statsmodels.stats.multitest", reason="statsmodels (the test extra) is the oracle")
    expected = multitest.multipletests([rows[n]["p_value"] for n in names], method="holm")[1]
    assert np.allclose([rows[n]["p_holm"] for n in names], expected, rtol=0, atol=1e-12)
    # the table marks the one, and says what the star means and what "detectable" is
    terminal.print_paired(result)
    shown = capsys.readouterr().out
    marked = [line for line in shown.splitlines() if "*" in line and "│" in line]
    assert len(marked) == 1 and f"{rows['rubric_real']['diff']:+.4f}" in marked[0]
    assert "Holm's correction" in shown and "1000 permutations, 10200 for those below 0.05" in shown
    assert "detectable" in shown


def test_one_metric_keeps_the_permutations_asked_and_its_plain_p_value():
    a, b = _tables(seed=4)
    result = compare_tables(a, b, ["rubric_real"], resamples=500, seed=1)
    (row,) = result["metrics"]
    assert result["permutations"] == 500 == row["permutations"] and row["p_holm"] == row["p_value"] and row["marked"]
    assert row["min_detectable"] is not None and row["min_detectable"] > 0


def test_the_detectable_difference_is_the_normal_theorys_for_data_of_known_spread():
    """Paired differences of known standard deviation sigma over n examples: a two-sided test at 95%
    detects a true difference of (z_0.975 + z_0.8) sigma / sqrt(n) 80% of the time. ragmem reads it
    from the bootstrap interval of one sample; it agrees within the sample's and the bootstrap's noise."""
    rng = np.random.default_rng(11)
    n, sigma = 2000, 0.3
    a = rng.normal(0.5, 0.2, n)
    b = a + rng.normal(0.0, sigma, n)  # B - A: mean 0, standard deviation sigma
    result = stats.paired("m", mean_aggregator(pd.Series(a)), mean_aggregator(pd.Series(b)), 2000, 0)
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
    truth = z * sigma / np.sqrt(n)
    assert min_detectable(*result.ci) == pytest.approx(truth, rel=0.08)
    assert min_detectable(None, None) is None


def test_clustered_runs_are_compared_cluster_by_cluster_and_the_output_says_so(capsys):
    """Two runs of ``stats.cluster_by``: their tables carry the cluster column; the comparison
    resamples and swaps whole clusters (wider than the examples' interval on clustered data) and
    says the unit and how many."""
    rng = np.random.default_rng(3)
    groups, size = 20, 10
    ids = [f"q{i}" for i in range(groups * size)]
    cluster = [f"conv{i // size}" for i in range(groups * size)]
    shift = np.repeat(rng.random(groups) < 0.5, size)  # a conversation B gets right or wrong wholly
    a = pd.DataFrame({"id": ids, "cluster": cluster, "rubric_x": np.repeat(rng.random(groups) < 0.5, size).astype(float)})
    b = pd.DataFrame({"id": ids, "cluster": cluster, "rubric_x": shift.astype(float)})
    params = {"zero_division": "0", "stats.cluster_by": "conversation_id"}
    a.attrs["run"], b.attrs["run"] = _run("a" * 32), _run("b" * 32)
    a.attrs["run"].data.params = b.attrs["run"].data.params = params
    result = compare_tables(a, b, ["rubric_x"], resamples=500, seed=0)
    assert result["resampled"] == {"unit": "clusters", "n": 20, "by": "conversation_id"}
    row = result["metrics"][0]
    assert row["n_clusters"] == 20
    plain = compare_tables(a.drop(columns="cluster"), b.drop(columns="cluster"), ["rubric_x"], resamples=500, seed=0)
    assert plain["resampled"] == {"unit": "examples", "n": 200}
    assert row["ci_high"] - row["ci_low"] > 2 * (plain["metrics"][0]["ci_high"] - plain["metrics"][0]["ci_low"])
    terminal.print_paired(result)
    assert "resampled: 20 clusters (conversation_id) of the 200 examples" in capsys.readouterr().out


def test_compare_says_how_many_examples_each_side_rests_on_and_marks_a_partial_one(capsys):
    """B's faithfulness replies failed on 11 of 16 examples: the row says 16 of 16 against 5 of 16,
    is marked partial with the reason, in the terminal and diff.html."""
    ids = [f"q{i}" for i in range(16)]
    a = pd.DataFrame({"id": ids, "error": [None] * 16, "faithfulness": [1.0] * 16, "faithfulness_error": [None] * 16})
    b = a.copy()
    b.loc[5:, "faithfulness"] = np.nan
    b.loc[5:, "faithfulness_error"] = "reply cut off at 256 tokens"
    a.attrs["run"], b.attrs["run"] = _run("a" * 32), _run("b" * 32)
    result = compare_tables(a, b, ["faithfulness"], resamples=200, seed=0)
    row = result["metrics"][0]
    assert row["coverage_a"] == {"scored": 16, "of": 16} and row["coverage_b"] == {"scored": 5, "of": 16}
    assert row["partial"] == {"B": "5 of 16 (11: reply cut off at … tokens)"}  # (the cause: the count of one reply left out)
    terminal.print_paired(result)
    shown = " ".join(capsys.readouterr().out.split())
    assert "(partial)" in shown.split("partial (scored")[0]  # the row's mark (80 columns wrap it below the name)
    assert "faithfulness B 5 of 16 (11: reply cut off at … tokens)" in shown
