"""Quality gates: bars a run must clear; a failed gate is one line per gate and exit 3, after the
run is fully computed and logged."""

from __future__ import annotations

import json

import pytest

import ragmem
from ragmem.errors import ConfigError
from ragmem.run import engine, gates, prepare
from ragmem.tracking import files
from tests.conftest import ROOT

DEMO = str(ROOT / "ragmem" / "datasets" / "demo_bilingual.json")


def test_options_become_gates_and_bad_ones_are_refused():
    assert gates.from_options(["pass_rate=0.8", "f1=0.5"], ["latency_p95=2"]) == \
        {"pass_rate": {"min": 0.8}, "f1": {"min": 0.5}, "latency_p95": {"max": 2.0}}
    for bad in ("pass_rate", "pass_rate=high", "=0.5"):
        with pytest.raises(ConfigError, match="expected METRIC=NUMBER"):
            gates.from_options([bad], [])


def test_a_gate_fails_below_its_min_above_its_max_and_on_null():
    results = gates.evaluate({"pass_rate": 0.58, "latency_p95": 2.5, "f1": None, "avg_coverage": 0.9},
                             {"pass_rate": {"min": 0.8}, "latency_p95": {"max": 2.0}, "f1": {"min": 0.1},
                              "avg_coverage": {"min": 0.5, "max": 1.0}})
    assert [r.passed for r in results] == [False, False, False, True]
    assert [r.line() for r in results[:3]] == ["gate failed: pass_rate 0.58 < 0.8 (min)",
                                               "gate failed: latency_p95 2.5 > 2 (max)",
                                               "gate failed: f1 could not be computed (null)"]


def test_the_summary_carries_the_gates_and_a_gated_metric_is_computed_even_unselected():
    result = ragmem.evaluate(DEMO, track=False, metrics=["avg_coverage"],
                             gates={"pass_rate": {"min": 0.9}, "f1": {"min": 0.5}})
    assert result.metrics["f1"] == pytest.approx(0.75)  # gated, so computed
    assert [(g["metric"], g["passed"]) for g in result.summary["gates"]] == [("pass_rate", False), ("f1", True)]


def test_an_unknown_gated_metric_is_refused_before_any_work():
    with pytest.raises(ConfigError, match="gates.pass_rat: unknown metric"):
        ragmem.evaluate(DEMO, track=False, gates={"pass_rat": {"min": 0.9}})
    with pytest.raises(ConfigError, match=r"gates.f1: expected \{min: X\}, \{max: X\} and/or \{max_regression: DELTA\}"):
        ragmem.evaluate(DEMO, track=False, gates={"f1": {}})


def test_a_users_test_suite_asserts_the_same_gates():
    from ragmem.testing import assert_gates

    result = ragmem.evaluate(DEMO, track=False, gates={"pass_rate": {"min": 0.5}})
    assert_gates(result)  # the run's own gates: pass_rate 0.5833 >= 0.5
    assert_gates(result.summary, {"f1": {"min": 0.7}, "avg_coverage": {"max": 1.0}})
    with pytest.raises(AssertionError) as failed:
        assert_gates(result, {"pass_rate": {"min": 0.9}, "accuracy": {"min": 0.9}})
    assert str(failed.value).splitlines() == ["gate failed: pass_rate 0.5833 < 0.9 (min)",
                                              "gate failed: accuracy 0.6667 < 0.9 (min)"]


def _answers(folder, name, wrong: set[int], n: int = 120) -> str:
    """``n`` replayed examples answering their reference, except those in ``wrong``."""
    path = folder / name
    path.write_text(json.dumps([{"id": f"e{i}", "query": f"Which city hosts site {i}?",
                                 "reference_answer": f"Site {i} is in Lisbon harbour.",
                                 "generated_answer": (f"Site {i} is in Oslo fjord." if i in wrong
                                                      else f"Site {i} is in Lisbon harbour.")} for i in range(n)]))
    return str(path)


def test_a_baseline_gate_fails_on_a_real_regression_not_on_noise(tmp_path, shared_store):
    tracking = {"uri": shared_store["uri"], "artifact_root": shared_store["artifact_root"]}
    base = ragmem.evaluate(_answers(tmp_path, "base.json", set(range(0, 120, 20))), tracking=tracking,
                           experiment="gates-baseline")
    assert base.metrics["pass_rate"] == pytest.approx(0.95)
    prefix = base.run_id[:8]  # the prefix the tables show is accepted
    noisy = ragmem.evaluate(_answers(tmp_path, "noisy.json", set(range(0, 120, 20)) | {7}), tracking=tracking,
                            experiment="gates-baseline", baseline=prefix, gates={"pass_rate": {"max_regression": 0.0}})
    [gate] = noisy.summary["gates"]
    assert gate["passed"] and gate["baseline"] == base.run_id and gate["diff"] == pytest.approx(-1 / 120)
    assert gate["ci_high"] >= 0  # one flipped example is not a significant drop
    # what the comparison could have seen: 2.80 standard errors, read from the interval's width
    assert gate["min_detectable"] == pytest.approx(2.8016 * (gate["ci_high"] - gate["ci_low"]) / (2 * 1.95996), rel=1e-3)
    assert gates.passed_line(gate) == (f"pass_rate vs baseline {prefix}: -0.0083 [{gate['ci_low']:+.4f}, "
                                       f"{gate['ci_high']:+.4f}]; the comparison would detect a change of "
                                       f"{gate['min_detectable']:.4f} 80% of the time (a smaller one may be there, unseen)")
    worse = ragmem.evaluate(_answers(tmp_path, "worse.json", set(range(0, 120, 3))), tracking=tracking,
                            experiment="gates-baseline", baseline=base.run_id,
                            gates={"pass_rate": {"max_regression": 0.05}, "f1": {"min": 0.0}})
    regression = [g for g in worse.summary["gates"] if g["metric"] == "pass_rate"][0]
    assert not regression["passed"] and regression["ci_high"] < -0.05 and regression["p_value"] < 0.05
    line = gates.GateResult(**regression).line()
    assert line.startswith(f"gate failed: pass_rate 0.6667 vs baseline {prefix} 0.95: -0.2833 [")
    assert line.endswith("worse by more than max_regression 0.05")
    ready = prepare.for_run(prepare.resolve(extra={"tracking": tracking, "baseline": base.run_id,
                                                   "gates": {"pass_rate": {"max_regression": 0.5}},
                                                   "data": {"files": [{"path": str(tmp_path / "worse.json")}]}}))
    assert ready.config.baseline == base.run_id and ready.baseline.attrs["run"].info.run_id == base.run_id
    tolerant = gates.regressions(ready.config, worse.table, worse.params, worse.metrics, ready.baseline)
    assert tolerant[0].passed  # a drop within DELTA passes


def test_a_baseline_is_checked_before_any_work(tmp_path, shared_store):
    tracking = {"uri": shared_store["uri"], "artifact_root": shared_store["artifact_root"]}
    data = _answers(tmp_path, "d.json", set())
    with pytest.raises(ConfigError, match="max_regression: needs a baseline run"):
        ragmem.evaluate(data, track=False, gates={"f1": {"max_regression": 0.1}})
    with pytest.raises(ConfigError, match="baseline: run 'ffffffff': no run id starts with it"):
        ragmem.evaluate(data, tracking=tracking, baseline="ffffffff", gates={"f1": {"max_regression": 0.1}})
    with pytest.raises(ConfigError, match="expected METRIC=NUMBER"):
        gates.from_options([], [], ["f1"])


def test_a_streamed_run_is_gated_against_its_baseline_chunk_by_chunk(tmp_path, shared_store, monkeypatch):
    """data.chunk_size under the data's size: the run's table stays a file, paired with the
    baseline's a chunk at a time (never read whole), with the same figures as a run held whole."""
    tracking = {"uri": shared_store["uri"], "artifact_root": shared_store["artifact_root"]}
    base = ragmem.evaluate(_answers(tmp_path, "base.json", set(range(0, 120, 20))), tracking=tracking,
                           experiment="gates-streamed")
    worse, gate = _answers(tmp_path, "worse.json", set(range(0, 120, 3))), {"pass_rate": {"max_regression": 0.05}}
    held = ragmem.evaluate(worse, tracking=tracking, experiment="gates-streamed", baseline=base.run_id, gates=gate)
    monkeypatch.setattr(files, "read_table", lambda path: pytest.fail("a table was read whole"))
    monkeypatch.setattr(files.ParquetTable, "frame", lambda self: pytest.fail("a table was read whole"))
    streamed = ragmem.evaluate(worse, {"data": {"chunk_size": 50}}, tracking=tracking, experiment="gates-streamed",
                               baseline=base.run_id, gates=gate)
    [a], [b] = held.summary["gates"], streamed.summary["gates"]
    assert not b["passed"] and b["diff"] == pytest.approx(-0.2833, abs=1e-4)
    assert {k: b[k] for k in ("diff", "ci_low", "ci_high", "p_value")} == pytest.approx(
        {k: a[k] for k in ("diff", "ci_low", "ci_high", "p_value")}, abs=1e-12)


def test_a_sweep_of_streamed_children_marks_its_ties_as_a_held_one_does(tmp_path):
    path = tmp_path / "sweep.json"  # answers close to their reference (i % 5) or far from it (i % 7)
    path.write_text(json.dumps([{"id": f"e{i}", "query": f"Which city hosts site {i}?",
                                 "reference_answer": f"Site {i} is in Lisbon harbour.",
                                 "generated_answer": f"Site {i} is in Oslo fjord." if i % 7 == 0 else
                                 f"Site {i} is in Lisbon." if i % 5 == 0 else f"Site {i} is in Lisbon harbour."}
                                for i in range(120)]))
    config = {"data": {"files": [{"path": str(path)}]}, "tracking": {"enabled": False},
              "sweep": {"grid": {"judge.threshold": [0.3, 0.7, 0.95]}, "objective": {"metric": "pass_rate"}}}
    held = engine.sweep(config)
    streamed = engine.sweep({**config, "data": {**config["data"], "chunk_size": 40}})
    marks = [[c["vs_best"] for c in s["children"]] for s in (held, streamed)]
    assert len({m["diff"] for m in marks[0]}) == 3  # three different pass rates
    for a, b in zip(*marks):
        assert {k: b[k] for k in ("diff", "ci_low", "ci_high", "p_value")} == pytest.approx(
            {k: a[k] for k in ("diff", "ci_low", "ci_high", "p_value")}, abs=1e-12)
        assert (a["is_best"], a["significantly_worse"]) == (b["is_best"], b["significantly_worse"])


def test_a_baseline_gate_of_clustered_runs_resamples_the_clusters_and_says_how_many(tmp_path, shared_store):
    """Twelve conversations of ten questions; B answers two whole conversations wrong: the gate's
    comparison resamples the 12 clusters (a wider interval than the examples' on the same runs)."""
    tracking = {"uri": shared_store["uri"], "artifact_root": shared_store["artifact_root"]}

    def data(name, wrong):
        path = tmp_path / name
        path.write_text(json.dumps([{"id": f"e{i}", "query": f"Which city hosts site {i}?", "conversation_id": f"c{i // 10}",
                                     "reference_answer": f"Site {i} is in Lisbon harbour.",
                                     "generated_answer": (f"Site {i} is in Oslo fjord." if i // 10 in wrong
                                                          else f"Site {i} is in Lisbon harbour.")} for i in range(120)]))
        return str(path)

    clustered = {"cluster_by": "conversation_id"}
    base = ragmem.evaluate(data("a.json", set()), tracking=tracking, experiment="gates-clusters", stats=clustered)
    worse = ragmem.evaluate(data("b.json", {3, 7}), tracking=tracking, experiment="gates-clusters", stats=clustered,
                            baseline=base.run_id, gates={"pass_rate": {"max_regression": 0.3}})
    [gate] = worse.summary["gates"]
    assert gate["passed"] and gate["n_clusters"] == 12 and gate["diff"] == pytest.approx(-20 / 120)
    assert gates.passed_line(gate).endswith("; 12 clusters resampled (stats.cluster_by: whole clusters weighed and "
                                            "swapped together)")
    plain = ragmem.evaluate(data("c.json", {3, 7}), tracking=tracking, experiment="gates-clusters",
                            baseline=base.run_id, gates={"pass_rate": {"max_regression": 0.3}})
    [alone] = plain.summary["gates"]
    assert alone["n_clusters"] is None
    assert gate["ci_high"] - gate["ci_low"] > 1.5 * (alone["ci_high"] - alone["ci_low"])


def test_a_baseline_gate_on_the_judges_cost_fails_when_it_doubles_and_passes_when_it_halves(tmp_path, shared_store,
                                                                                           monkeypatch):
    """The judge's cost is lower-is-better (declared in the catalogue, not guessed from its name): a
    ``max_regression`` gate fails when it rises beyond the bound and passes when it falls; a total of
    each run is compared as measured, without an interval. ``compare`` lists the cheapest run first."""
    from mlflow import MlflowClient

    from ragmem.tracking import compare
    from tests.openai_stub import Stub

    monkeypatch.setenv("RAGMEM_TEST_KEY", "sk-test-cost")
    data = tmp_path / "cost.json"
    data.write_text(json.dumps([{"id": f"q{i}", "query": f"q{i}", "reference_answer": "r", "generated_answer": "a"}
                                for i in range(6)]), encoding="utf-8")
    tracking = {**shared_store, "max_traces": 0}

    def judge(stub, price: float, cache: str) -> dict:  # (a cache of its own: every run pays for its verdicts)
        return {"type": "llm", "model": "judge-test", "base_url": stub.base_url, "api_key_env": "RAGMEM_TEST_KEY",
                "cache_dir": str(tmp_path / cache), "retry_backoff_s": 0.01, "timeout_s": 5,
                "prices": {"judge-test": {"input": price, "output": 4 * price}}}

    gate = {"judge_cost_usd": {"max_regression": 0.0}}
    with Stub(chat=lambda request: {"verdict": "yes", "reason": "fine"}) as stub:
        base = ragmem.evaluate(str(data), tracking=tracking, experiment="gates-cost", judge=judge(stub, 2.0, "base"),
                               metrics=["pass_rate"])
        doubled = ragmem.evaluate(str(data), tracking=tracking, experiment="gates-cost", metrics=["pass_rate"],
                                  judge=judge(stub, 4.0, "doubled"), baseline=base.run_id, gates=gate)
        halved = ragmem.evaluate(str(data), tracking=tracking, experiment="gates-cost", metrics=["pass_rate"],
                                 judge=judge(stub, 1.0, "halved"), baseline=base.run_id, gates=gate)
    cost = base.metrics["judge_cost_usd"]
    assert cost > 0 and doubled.metrics["judge_cost_usd"] == pytest.approx(2 * cost)
    [rose] = doubled.summary["gates"]
    assert not rose["passed"] and rose["diff"] == pytest.approx(cost) and rose["p_value"] is None
    assert gates.GateResult(**rose).line() == (
        f"gate failed: judge_cost_usd {2 * cost:.4g} vs baseline {base.run_id[:8]} {cost:.4g}: {cost:+.4g} "
        "(a total of each run, measured: no interval), worse by more than max_regression 0")
    [fell] = halved.summary["gates"]
    assert fell["passed"] and fell["diff"] == pytest.approx(-cost / 2)
    table, _, _ = compare.list_runs(MlflowClient(shared_store["uri"]), "gates-cost", metric="judge_cost_usd")
    assert list(table["run_id"]) == [halved.run_id, base.run_id, doubled.run_id]  # lower is better: ascending
    assert list(table["judge_cost_usd"]) == pytest.approx([cost / 2, cost, 2 * cost])
