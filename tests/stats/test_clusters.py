"""Clustered examples (``stats.cluster_by``): whole clusters weighed and swapped together, the same
intervals chunk by chunk as whole, expanded levels, the design effect against a known truth, too few
clusters resampled as examples, and a run that says all of it."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import ragmem
from ragmem.data.loaders import parse_record
from ragmem.metrics.base import MetricResult, mean_aggregator
from ragmem.report import terminal
from ragmem.schema import example_keys
from ragmem.stats import clusters
from ragmem.stats import intervals as stats
from ragmem.stats.run_statistics import RunStatistics


def _table(groups: int, size: int, seed: int = 0, shared: bool = True) -> pd.DataFrame:
    """``groups`` clusters of ``size`` examples; ``shared``: every example of a cluster has its
    cluster's value (the design effect is then the cluster size), else independent values."""
    rng = np.random.default_rng(seed)
    rate = rng.random(groups)
    cluster = np.repeat(np.arange(groups), size)
    values = rate[cluster] if shared else rng.random(groups * size)
    return pd.DataFrame({"id": [f"e{i}" for i in range(groups * size)], "cluster": [f"c{c}" for c in cluster],
                         "m": values})


def test_the_weights_follow_the_cluster_and_an_example_without_one_is_its_own():
    keys = clusters.resampling_keys(["a", "b", "c", "d"], ["x", "x", None, float("nan")])
    assert keys[0] == keys[1] and len(set(keys.tolist())) == 3
    assert keys[2] == example_keys(["c"])[0] and keys[3] == example_keys(["d"])[0]
    # a cluster's key is never an example's of the same name, and no clusters: the examples' own keys
    assert clusters.resampling_keys(["x"], ["x"])[0] != example_keys(["x"])[0]
    assert (clusters.resampling_keys(["a", "b"]) == example_keys(["a", "b"])).all()
    weights = stats.poisson_weights(keys, 0, 50, seed=3)
    assert (weights[:, 0] == weights[:, 1]).all() and not (weights[:, 2] == weights[:, 3]).all()


def test_expanded_levels_widen_with_few_clusters_and_vanish_with_many():
    assert clusters.levels(0.95) == pytest.approx((0.025, 0.975))
    lows = [clusters.levels(0.95, g)[0] for g in (5, 10, 30, 100, 10_000)]
    assert lows == sorted(lows) and lows[0] < 0.005 and lows[-1] == pytest.approx(0.025, abs=1e-4)
    assert clusters.resampled(4) is None and clusters.resampled(5) == 5 and clusters.resampled(None) is None


def test_design_effect_is_the_cluster_size_when_a_cluster_shares_one_value_and_one_when_it_does_not():
    for shared, expected in ((True, 8.0), (False, 1.0)):
        table = _table(60, 8, shared=shared)
        agg = {"m": mean_aggregator(table["m"])}
        cl = stats.resample_all(agg, len(table), 2000, 0, clusters.table_keys(table))["m"]
        alone = stats.resample_all({"m": mean_aggregator(table["m"])}, len(table), 2000, 0,
                                   example_keys(table["id"]))["m"]
        assert clusters.design_effect(cl, alone) == pytest.approx(expected, rel=0.25)


def test_a_run_summed_chunk_by_chunk_gives_the_whole_tables_clustered_intervals_and_design_effects():
    table = _table(12, 7, seed=1)
    whole = RunStatistics(400, 5, 0.95)
    whole.add(table, MetricResult({"m": None}), {"m": mean_aggregator(table["m"])})
    chunked = RunStatistics(400, 5, 0.95)
    for start in range(0, len(table), 10):  # clusters cut across chunks
        part = table.iloc[start:start + 10].reset_index(drop=True)
        chunked.merge(RunStatistics.of_chunk(part, MetricResult({"m": None}), {"m": mean_aggregator(part["m"])}, 400, 5))
    expected = stats.bootstrap({"m": mean_aggregator(table["m"])}, len(table), 400, 5, 0.95,
                               clusters.table_keys(table), 12)["m"]
    assert chunked.n_clusters == whole.n_clusters == 12
    assert chunked.intervals(["m"])["m"] == pytest.approx(expected, abs=1e-12)
    assert whole.intervals(["m"])["m"] == pytest.approx(expected, abs=1e-12)
    assert chunked.design_effects(["m"])["m"] == pytest.approx(whole.design_effects(["m"])["m"], rel=1e-9)
    assert chunked.design_effects(["m"])["m"] > 3  # seven examples a cluster sharing one value
    # the clustered interval is wider than the examples' on the same data
    alone = stats.bootstrap({"m": mean_aggregator(table["m"])}, len(table), 400, 5, 0.95, example_keys(table["id"]))["m"]
    assert expected[1] - expected[0] > 1.5 * (alone[1] - alone[0])


def test_a_paired_comparison_swaps_whole_clusters_and_says_how_many():
    a, b = _table(10, 6, seed=2), _table(10, 6, seed=3)
    mine, theirs = (RunStatistics.of_chunk(t, MetricResult({"m": None}), {"m": mean_aggregator(t["m"])}, 300, 1,
                                           permutations=300) for t in (a, b))
    result = mine.paired(theirs, "m")
    keys = clusters.table_keys(a)
    expected = stats.paired("m", mean_aggregator(a["m"]), mean_aggregator(b["m"]), 300, 1, 0.95, keys, 300, 10)
    assert result.clusters == 10 and result.to_dict()["n_clusters"] == 10
    assert result.ci == pytest.approx(expected.ci, abs=1e-12) and result.p_value == pytest.approx(expected.p_value)


def test_too_few_clusters_are_resampled_as_examples_and_the_summary_says_so():
    table = _table(3, 10, seed=4)
    run = RunStatistics(300, 0, 0.95)
    run.add(table, MetricResult({"m": None}), {"m": mean_aggregator(table["m"])})
    alone = stats.bootstrap({"m": mean_aggregator(table["m"])}, len(table), 300, 0, 0.95, example_keys(table["id"]))["m"]
    assert run.n_clusters == 3 and run.intervals(["m"])["m"] == pytest.approx(alone, abs=1e-12)
    described = clusters.describe("conversation_id", 3, 30, run.design_effects(["m"]))
    assert "too few to resample" in described["method"] and "too few" in clusters.line(described)


def test_the_loader_reads_the_cluster_field_and_refuses_a_value_that_is_not_an_id():
    raw = {"id": "q1", "query": "q", "reference_answer": "r", "generated_answer": "a", "conversation_id": 7}
    example, problems = parse_record(raw, "d.jsonl", 1, cluster_by="conversation_id")
    assert not problems and example.cluster == "7"
    example, _ = parse_record({**raw, "conversation_id": None}, "d.jsonl", 1, cluster_by="conversation_id")
    assert example.cluster is None  # (absent: a cluster of its own)
    _, problems = parse_record({**raw, "conversation_id": [1]}, "d.jsonl", 3, cluster_by="conversation_id")
    assert problems and problems[0].field == "conversation_id" and problems[0].record == 3


def test_a_clustered_run_reports_its_clusters_design_effects_and_signature(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = []
    for c in range(12):  # a conversation the agent gets wholly right or wholly wrong
        right = rng.random() < 0.6
        for q in range(5):
            rows.append({"id": f"c{c}q{q}", "query": f"what is fact {c}.{q}", "reference_answer": f"alpha beta {c}",
                         "generated_answer": f"alpha beta {c}" if right else "gamma delta", "contexts": [f"alpha beta {c}"],
                         "conversation_id": f"conv{c}"})
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    plain = ragmem.evaluate(str(path), track=False, metrics=["pass_rate", "token_f1"])
    result = ragmem.evaluate(str(path), track=False, metrics=["pass_rate", "token_f1"], stats={"cluster_by": "conversation_id"})
    found = result.summary["clusters"]
    assert found["by"] == "conversation_id" and found["n"] == 12 and found["n_examples"] == 60
    assert found["design_effect"]["pass_rate"] > 3  # five questions a conversation, answered alike
    assert plain.summary["clusters"] is None and plain.metrics["pass_rate"] == result.metrics["pass_rate"]
    low, high = result.summary["ci"]["pass_rate"]
    plain_low, plain_high = plain.summary["ci"]["pass_rate"]
    assert high - low > 1.5 * (plain_high - plain_low)
    assert result.params["stats.signature"].endswith("|cluster:conversation_id")
    assert "|cluster:" not in plain.params["stats.signature"]
    terminal.print_summary(result.summary, show_all=False, stored=False)
    shown = capsys.readouterr().out
    assert "intervals resample 12 clusters (conversation_id) of 60 examples" in shown and "design effect pass_rate" in shown
