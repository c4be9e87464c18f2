"""The lifecycle suite (issue 59, point 2): generated scenarios with planted truths, run against three
layers with planted behaviour (one that updates and deletes correctly, one that never deletes, one
that keeps the old value after an update); each failure named by scenario, a layer that still returns
deleted facts flagged in the terminal, the result (the summary JSON) and an MLflow tag; which path
(its own call or the user's statement) each layer took."""

from __future__ import annotations

import pytest
from mlflow import MlflowClient

from ragmem.memory import lifecycle
from ragmem.reference.memory import BM25Memory
from ragmem.text.keywords import KeywordExtractor


class Correct(BM25Memory):
    """Updates and deletes as asked (ragmem's BM25 memory does)."""

    def __init__(self):
        super().__init__(KeywordExtractor())


class NeverDeletes(Correct):
    """Takes the delete call and forgets nothing (ADD-only extraction, as the issue describes mem0's)."""

    def delete(self, memory_id, user_id):
        pass


class KeepsOld(Correct):
    """Takes the update call and keeps the old value."""

    def update(self, memory_id, text, user_id):
        pass


def test_the_scenarios_are_seeded_bilingual_and_plant_their_truth():
    first, again = lifecycle.scenarios(seed=5), lifecycle.scenarios(seed=5)
    assert [c.qa[0].answer for c in first] == [c.qa[0].answer for c in again]  # (the seed decides)
    assert [c.qa[0].answer for c in first] != [c.qa[0].answer for c in lifecycle.scenarios(seed=6)]
    kinds = [c.qa[0].kind for c in first]
    assert kinds == [k for k in lifecycle.SCENARIOS for _ in range(4)]  # two a language, English and Chinese
    assert {c.id.split("-")[-2] for c in first} == {"en", "zh"}
    update = next(c for c in first if c.qa[0].kind == "update")
    assert update.sessions[1].operation == "update" and update.qa[0].forbidden == (update.sessions[1].target,)
    distractor = next(c for c in first if c.qa[0].kind == "distractor")
    assert sum(len(s.turns) for s in distractor.sessions) == 51 and len(distractor.qa[0].evidence) == 1
    old, new = "Lyon", "Porto"
    qa = update.qa[0].__class__("q", new, (), 2, kind="update", values=(new, old, f"from {old} to {new}"), forbidden=(old,))
    assert lifecycle.verdict(qa, "I moved from Lyon to Porto.") == 1.0  # (the change's own words name the old value)
    assert lifecycle.verdict(qa, "You live in Lyon.") == 0.0 and lifecycle.verdict(qa, "Lyon, or maybe Porto") == 0.0


def test_three_layers_with_planted_behaviour_are_told_apart_by_scenario(tmp_path, monkeypatch, capsys):
    from ragmem.report.bench_scopes import print_scopes
    from ragmem.run import engine

    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    layers = [{"name": n, "type": "python", "target": f"tests.memory.test_lifecycle:{n}"}
              for n in ("Correct", "NeverDeletes", "KeepsOld")]
    result = engine.bench_memory({
        "experiment": "lifecycle", "seed": 1, "stats": {"resamples": 100},
        "tracking": {"uri": store, "artifact_root": str(tmp_path / "artifacts"), "max_traces": 0},
        "bench": {"dataset": "lifecycle", "data": "seed:1/per_kind:2", "methods": layers}}, preflight=False)
    scopes = {(r["method"], r["scope"]): r["J"] for r in result["per_category"]}
    metrics = {m["method"]: m["metrics"] for m in result["methods"]}
    # the correct layer: every scenario but contradiction (an extractive answer cannot say two statements conflict)
    assert [scopes[("Correct", s)] for s in lifecycle.SCENARIOS] == [1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    assert metrics["Correct"]["deleted_still_recalled"] == 0.0 and metrics["Correct"]["deletion_compliance"] == 1.0
    # never deletes: the deleted fact still recalled and answered
    assert metrics["NeverDeletes"]["deleted_still_recalled"] == 1.0 and metrics["NeverDeletes"]["deletion_compliance"] == 0.0
    assert scopes[("NeverDeletes", "deletion")] == 0.0 and scopes[("NeverDeletes", "update")] == 1.0
    # keeps the old value: fails update only
    assert scopes[("KeepsOld", "update")] == 0.0 and scopes[("KeepsOld", "deletion")] == 1.0
    assert all(m["metrics"]["path_delete_api"] == 1.0 and m["metrics"]["path_update_api"] == 1.0 for m in result["methods"])
    # flagged: the result (the summary JSON), the MLflow tag, the terminal
    flags = {m["method"]: m["flags"] for m in result["methods"]}
    assert flags["Correct"] == {} and flags["KeepsOld"] == {}
    assert flags["NeverDeletes"] == {"ragmem.memory.deletion": "failed: 100% of deleted facts still recalled "
                                                               "(deletion compliance 0%; it must be 100%)"}
    child = next(m["run_id"] for m in result["methods"] if m["method"] == "NeverDeletes")
    client = MlflowClient(store)
    assert client.get_run(child).data.tags["ragmem.memory.deletion"].startswith("failed: 100%")
    # the cost of an answer: tokens of recalled context, ingest time per turn, and quality against tokens
    assert all(r["context tokens"] > 0 and r["ingest per turn (s)"] > 0 for r in result["results_table"])
    plotted = {a.path for a in client.list_artifacts(result["parent_run_id"], "plots")}
    assert "plots/quality_vs_tokens.png" in plotted
    print_scopes(result)
    said = " ".join(capsys.readouterr().out.split())
    assert "FLAGGED NeverDeletes: failed: 100% of deleted facts still recalled" in said
    assert "NeverDeletes fails: contradiction (J 0.00), deletion (J 0.00)" in said
    assert "KeepsOld fails: update (J 0.00), contradiction (J 0.00)" in said
    assert "Correct: delete through its own delete(), update through its own update()" in said


@pytest.mark.parametrize("layer, path", [("no_memory", "statement"), ("reference", "api")])
def test_a_layer_without_the_call_is_scored_on_the_statement_path(layer, path, tmp_path, monkeypatch):
    from ragmem.run import engine

    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    result = engine.bench_memory({"experiment": "lc", "tracking": {"enabled": False}, "stats": {"resamples": 0},
                                  "bench": {"dataset": "lifecycle", "methods": [layer]}}, preflight=False)
    m = result["methods"][0]["metrics"]
    assert m["path_delete_api"] == float(path == "api") and m["path_update_api"] == float(path == "api")
    assert result["manifest"]["data"]["path"] == "seed:0"  # (no bench.data: the run's seed)
