"""bench-memory compares every layer with a baseline on the same questions (paired bootstrap and
randomization test, :mod:`ragmem.memory.bench_compare`): a layer against itself is never marked, a layer
that drops memories at random (noise) is not, the reference memory against no memory is."""

import json
import random

import pytest

from ragmem.errors import ConfigError
from ragmem.memory.bench_compare import paired_layers
from ragmem.run import engine
from tests.memory.test_memory import KeywordMemory, _conversation, locomo_zip  # noqa: F401  (a fixture)


class NoisyMemory(KeywordMemory):
    """KeywordMemory that loses each recalled memory with probability ``drop`` (``seed``): the same
    layer, run twice with different seeds, differs by noise alone."""

    def __init__(self, seed=0, drop=0.3):
        super().__init__()
        self.rng, self.drop = random.Random(seed), drop

    def search(self, query, user_id, top_k):
        return [m for m in super().search(query, user_id, top_k) if self.rng.random() >= self.drop]


def _bench(data, methods, **bench):
    return engine.bench_memory({"experiment": "paired", "tracking": {"enabled": False}, "stats": {"resamples": 400},
                                "bench": {"data": str(data), "methods": methods, **bench},
                                "generator": {"type": "extractive"}, "judge": {"type": "keyword", "threshold": 0.5}},
                               preflight=False)


def test_a_layer_against_itself_is_never_marked_and_every_scope_is_there(tmp_path):
    data = tmp_path / "c.json"
    data.write_text(json.dumps(_conversation()))
    result = _bench(data, ["reference", {"name": "again", "type": "reference"}, "no_memory"])
    assert result["baseline"] == "reference"
    again = [r for r in result["paired"] if r["method"] == "again"]
    assert {(r["scope"], r["score"]) for r in again} == {("overall", "J"), ("overall", "F1"), ("multi-hop", "J"),
                                                         ("multi-hop", "F1"), ("single-hop", "J"), ("single-hop", "F1"),
                                                         ("abstention", "J")}
    assert all(r["diff"] == 0.0 and not r["marked"] for r in again)


def test_the_baseline_is_a_method_of_the_bench(tmp_path):
    data = tmp_path / "c.json"
    data.write_text(json.dumps(_conversation()))
    from ragmem.run import prepare

    with pytest.raises(ConfigError, match=r"^bench.baseline: 'mine' is not one of bench.methods \(reference, no_memory\)$"):
        prepare.resolve(None, extra={"bench": {"data": str(data), "methods": ["reference", "no_memory"], "baseline": "mine"}})


def test_paired_layers_align_questions_and_mark_only_an_interval_that_excludes_0():
    def rows(scores):
        return [{"conversation": "c", "question": f"q{i}", "category": 4, "judge_score": s, "token_f1": s}
                for i, s in enumerate(scores)]

    base = rows([0.0] * 30)
    out = paired_layers({"base": base, "better": rows([1.0] * 30), "same": rows([0.0] * 30),
                         "half": list(reversed(rows([1.0, 0.0] * 15)))}, "base", [4], resamples=300, seed=0)
    by = {(r["method"], r["scope"], r["score"]): r for r in out}
    assert by[("better", "overall", "J")]["diff"] == 1.0 and by[("better", "overall", "J")]["marked"]
    assert by[("same", "overall", "J")]["diff"] == 0.0 and not by[("same", "overall", "J")]["marked"]
    assert by[("half", "single-hop", "F1")]["diff"] == 0.5 and by[("half", "single-hop", "F1")]["n_shared"] == 30


def test_on_locomo_noise_is_not_marked_and_memory_against_none_is(locomo_zip):
    locomo = locomo_zip
    noisy = [{"name": f"noisy{seed}", "type": "python", "target": "tests.memory.test_bench_paired:NoisyMemory",
              "params": {"seed": seed}} for seed in (1, 2)]
    result = _bench(locomo, [*noisy, "reference", "no_memory"], limit_conversations=1, baseline="noisy1")
    by = {(r["method"], r["scope"], r["score"]): r for r in result["paired"]}
    noise = [r for r in result["paired"] if r["method"] == "noisy2"]
    assert len(noise) == 11 and not any(r["marked"] for r in noise)  # the same layer, another seed: noise
    # (unmarked although some 95% intervals of a category miss 0: Holm's correction over the 11 figures)
    assert by[("noisy2", "overall", "J")]["n_shared"] == 152
    result = _bench(locomo, ["reference", "no_memory"], limit_conversations=1)
    by = {(r["method"], r["scope"], r["score"]): r for r in result["paired"]}
    assert by[("no_memory", "overall", "J")]["marked"] and by[("no_memory", "overall", "J")]["diff"] < 0
    assert by[("no_memory", "overall", "F1")]["marked"]
    assert by[("no_memory", "abstention", "J")]["diff"] == 1.0  # it says "I don't know" to every one


@pytest.mark.e2e  # the command's flow on the shared Prefect server (in this process)
def test_a_rerun_from_the_manifest_reproduces_every_offline_score(tmp_path, shared_store, prefect_env, ragmem_main):
    data = tmp_path / "c.json"
    data.write_text(json.dumps(_conversation()))
    config = tmp_path / "bench.json"
    config.write_text(json.dumps({"experiment": "bench-rerun", "stats": {"resamples": 200},
                                  "tracking": {"uri": shared_store["uri"], "artifact_root": shared_store["artifact_root"]},
                                  "bench": {"data": str(data), "methods": ["reference", "no_memory"]},
                                  "judge": {"type": "keyword", "threshold": 0.5}}))
    env = {**prefect_env, "MLFLOW_TRACKING_URI": shared_store["uri"]}
    done = ragmem_main(["bench-memory", str(config), "-o", str(tmp_path / "first.json")], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    first = json.loads((tmp_path / "first.json").read_text())
    manifest = first["manifest"]
    assert manifest["data"]["sha256"] == __import__("hashlib").sha256(data.read_bytes()).hexdigest()
    assert manifest["categories"]["abstention"] == 5 and manifest["top_k"] == 10
    assert [m["type"] for m in manifest["methods"]] == ["reference", "no_memory"] and manifest["judge"].startswith("judge:keyword")

    again = ragmem_main(["bench-memory", "--rerun", first["parent_run_id"][:8], "-o", str(tmp_path / "again.json")],
                        env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    result = json.loads((tmp_path / "again.json").read_text())
    assert result["rerun_of"] == first["parent_run_id"] and result["parent_run_id"] != first["parent_run_id"]
    assert [(r["method"], r["identical"]) for r in result["rerun"]] == [("reference", True), ("no_memory", True)]
    assert all(p["diff"] == 0.0 and not p["marked"] for r in result["rerun"] for p in r["paired"])
    assert len(result["results_table"]) == 2 and all(  # every score the same, latencies aside
        {k: v for k, v in a.items() if "(s)" not in k} == {k: v for k, v in b.items() if "(s)" not in k}
        for a, b in zip(result["results_table"], first["results_table"]))
    assert "rerun: reference: every per-question score identical to run " in " ".join(again.stdout.split())

    data.write_text(json.dumps(_conversation(qa=[{"question": "Q?", "answer": "A", "evidence": [], "category": 4}])))
    changed = ragmem_main(["bench-memory", "--rerun", first["parent_run_id"][:8]], env=env, cwd=tmp_path)
    assert changed.returncode == 2 and changed.stderr.strip().splitlines()[-1].startswith(
        f"error: --rerun {first['parent_run_id'][:8]}: the data {data} is missing or not the bytes the first run read")
    neither = ragmem_main(["bench-memory"], env=env, cwd=tmp_path)
    assert neither.returncode == 2 and "give a CONFIG, or --rerun PARENT_RUN_ID" in neither.stderr
