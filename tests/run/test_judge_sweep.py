"""The judge as a sweep dimension: grid points that differ only in the judge reuse their sibling's
agent answers (read from its journal), and the sweep says how far the judges agree (Kendall's tau,
against scipy) and which configuration each chose; judge.prompt_variant's stricter prompts."""

import json
import random

import pytest
from scipy.stats import kendalltau

from ragmem.prompts import templates as prompts
from ragmem.run import engine
from ragmem.run.judge_sweep import answer_sources, kendall_tau
from tests import sample_agents
from tests.openai_stub import Stub, data_block, user_text

N = 10


def _opposite_judges(request):
    """judge-a passes the GOOD answers, judge-b the BAD ones: they rank the agent's two settings in
    opposite orders."""
    answer = data_block(request, "answer")
    liked = "GOOD" if request["model"] == "judge-a" else "BAD"
    return {"verdict": "yes" if liked in answer else "no", "reason": f"{request['model']} likes {liked}"}


def test_two_judges_that_rank_two_agent_settings_in_opposite_orders(tmp_path, shared_store):
    data = tmp_path / "data.json"
    data.write_text(json.dumps([{"id": f"e{i}", "query": f"question {i}", "reference_answer": "any"} for i in range(N)]))
    sample_agents.QUALITY_CALLS.clear()
    with Stub(chat=_opposite_judges) as stub:
        config = {"experiment": "judge-sweep", "data": {"files": [str(data)]}, "metrics": ["pass_rate"],
                  "agent": {"type": "python", "target": "tests.sample_agents:Quality", "concurrency": 2},
                  "judge": {"type": "llm", "model": "judge-a", "base_url": stub.base_url,
                            "cache_dir": str(tmp_path / "cache")},
                  "tracking": {"uri": shared_store["uri"], "artifact_root": shared_store["artifact_root"], "max_traces": 0},
                  "stats": {"resamples": 200},
                  "sweep": {"grid": {"agent.params.good": [True, False], "judge.model": ["judge-a", "judge-b"]},
                            "objective": {"metric": "pass_rate"}}}
        result = engine.sweep(config, preflight=False)
    # the agent answered each of its 2 settings once: 2 x N calls, not 4 x N
    assert len(sample_agents.QUALITY_CALLS) == 2 * N
    children = {(c["params"]["agent.params.good"], c["params"]["judge.model"]): c for c in result["children"]}
    assert {k: c["metrics"]["pass_rate"] for k, c in children.items()} == {
        (True, "judge-a"): 1.0, (False, "judge-a"): 0.0, (True, "judge-b"): 0.0, (False, "judge-b"): 1.0}
    judges = result["judges"]
    [pair] = judges["pairs"]
    assert pair["kendall_tau"] == -1.0 and pair["ci"] == [-1.0, -1.0] and pair["n_configurations"] == 2
    chosen = {j["judge"]["judge.model"]: j["chosen"]["agent"]["agent.params.good"] for j in judges["judges"]}
    assert chosen == {"judge-a": True, "judge-b": False}  # two different choices
    # each judge-only sibling's journal holds the answers it reused (a resume of it needs no sibling)
    from ragmem.run.journal import Journal
    sibling = children[(True, "judge-b")]["run_id"]
    assert len(Journal(sibling, resume=True).outputs()) == N


def test_points_that_differ_only_in_the_judge_take_the_first_siblings_answers():
    points = [{"retriever.top_k": k, "judge.model": m} for k in (1, 5) for m in ("a", "b", "c")]
    assert answer_sources(points) == {1: 0, 2: 0, 4: 3, 5: 3}
    rubric = [{"rubrics.tone.criteria": t, "agent.params.x": 1} for t in ("Polite.", "Very polite.")]
    assert answer_sources(rubric) == {1: 0}


def test_kendall_tau_equals_scipy_with_and_without_ties():
    rng = random.Random(0)
    for n in (2, 3, 5, 8, 13):
        for _ in range(40):
            x = [rng.choice([0.1, 0.2, 0.3, 0.5, 0.8]) for _ in range(n)]
            y = [rng.choice([0.0, 0.25, 0.5, 0.75]) for _ in range(n)]
            expected = kendalltau(x, y).statistic
            got = kendall_tau(x, y)
            if got is None:
                assert expected != expected  # scipy: nan (a ranking of ties only)
            else:
                assert got == pytest.approx(expected, abs=1e-12)


def test_the_strict_prompt_variant_is_stricter_and_keyed_apart(tmp_path):
    import ragmem

    data = tmp_path / "d.json"
    data.write_text(json.dumps([{"query": "q", "reference_answer": "r", "generated_answer": "a"}]))
    seen = []
    with Stub(chat=lambda r: seen.append(user_text(r)) or {"verdict": "yes", "reason": "ok"}) as stub:
        settings = {"type": "llm", "model": "m", "base_url": stub.base_url, "cache_dir": str(tmp_path / "c")}
        default = ragmem.evaluate(str(data), track=False, judge=settings, metrics=["pass_rate"])
        strict = ragmem.evaluate(str(data), track=False, judge={**settings, "prompt_variant": "strict"},
                                 metrics=["pass_rate"])
    assert len(seen) == 2  # a new prompt: not the default's cached reply
    assert seen[0].startswith(prompts.TASKS["answer_correctness"]["instruction"])
    assert seen[1].startswith(prompts.STRICT["answer_correctness"]) and "every key fact" in seen[1]
    assert "|variant:strict" in strict.summary["params"]["judge.signature"]
    assert "variant" not in default.summary["params"]["judge.signature"]
    assert set(prompts.STRICT) == set(prompts.TASKS)  # one stricter variant of each built-in prompt


def test_a_grid_over_a_rubrics_text_makes_judge_only_siblings_with_their_own_prompt_version():
    from ragmem.run import sweep as sweeps

    base = {"metrics": ["pass_rate"], "judge": {"type": "llm", "model": "m", "base_url": "http://127.0.0.1:9/v1"},
            "rubrics": {"tone": {"criteria": "Polite.", "scale": "1-5", "inputs": ["answer"]}}}
    spec = sweeps.parse_sweep({"grid": {"retriever.top_k": [1, 5], "rubrics.tone.criteria": ["Polite.", "Very polite."]}})
    points, configs = zip(*sweeps.point_configs(base, spec, 0))
    versions = [cfg.rubric_definitions()[0].version for cfg in configs]
    assert versions[0] == versions[2] != versions[1] == versions[3]  # the text is the rubric's version
    assert answer_sources(list(points)) == {1: 0, 3: 2}  # each top_k answers once
