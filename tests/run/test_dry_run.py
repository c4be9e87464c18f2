"""``ragmem run --dry-run``: the requests, cached share and cost a run would have, nothing sent."""

from __future__ import annotations

import collections
import json

import pytest

import ragmem
from tests.conftest import ROOT
from tests.openai_stub import Stub, data_block, user_text
from tests.judges.test_llm_judge import _dataset, task_of

METRICS = ["accuracy", "answer_correctness", "contextual_precision", "answer_relevancy", "context_entity_recall",
           "faithfulness"]


def _chat(request):
    task = task_of(request)
    if task == "entities":
        return {"entities": [w for w in data_block(request, "text").split() if w[:1].isupper()]}
    if task == "claims":
        return {"claims": [s.strip() for s in data_block(request, "answer").split(".") if s.strip()]}
    if task == "question":  # one question per answer and attempt, as a real model's would differ
        variant = user_text(request).split("(attempt ")[1].split(":")[0]
        return {"question": f"What about {data_block(request, 'answer')} ({variant})?", "noncommittal": 0}
    return {"verdict": "yes" if "good" in user_text(request) else "no", "reason": "scripted"}


def _settings(stub, tmp_path, **judge):
    return {"judge": {"type": "llm", "model": "judge-test", "base_url": stub.base_url, "retry_backoff_s": 0.01,
                      "cache_dir": str(tmp_path / "cache"), "prices": {"judge-test": {"input": 2.0, "output": 8.0}},
                      **judge},
            "embeddings": {"model": "embed-test", "base_url": stub.base_url, "cache_dir": str(tmp_path / "ecache")},
            "metrics": METRICS}


def _sent(stub):
    """Requests the stub received, per task (embeddings as one)."""
    counts = collections.Counter()
    for request in stub.requests:
        counts["embeddings" if "input" in request else task_of(request)] += 1
    return counts


def test_a_dry_run_sends_nothing_and_counts_what_the_run_then_sends(tmp_path):
    data = _dataset(tmp_path, n=12)
    with Stub(chat=_chat, embed=lambda t: [1.0, float(len(t))]) as stub:
        plan = ragmem.dry_run(data, **_settings(stub, tmp_path))
        assert stub.requests == []  # preflight is a GET /models; no completion or embedding was asked for
        lines = {(line.metric, line.endpoint): line for line in plan.lines}
        result = ragmem.evaluate(data, track=False, **_settings(stub, tmp_path))
        sent = _sent(stub)
        again = ragmem.dry_run(data, **_settings(stub, tmp_path))
    assert result.metrics["judge_failures"] == 0
    # per metric, the counts of the run that followed (no repairs were needed)
    assert lines[("answer_correctness", "judge")].requests == sent["answer_correctness"] == 12
    assert lines[("contextual_precision", "judge")].requests == sent["chunk_relevance"] == 24
    assert lines[("answer_relevancy", "judge")].requests == sent["question"] == 36
    assert lines[("answer_relevancy", "embeddings")].requests == sent["embeddings"] == 12 + 36
    assert lines[("context_entity_recall", "judge")].requests == sent["entities"]
    faithfulness = lines[("faithfulness", "judge")].requests
    assert faithfulness == sent["claims"] + sent["claim_support"] == 12 + 24  # claims, then one per claim
    assert all(line.cached == 0 and not line.estimated for line in plan.lines)
    total = plan.total()
    assert total.requests == sum(sent.values()) and total.tokens_in > 0 and total.tokens_out > 0
    # judge.prices: 2 and 8 USD per million tokens; the embeddings model has no price and is named
    judge_lines = [line for line in plan.lines if line.endpoint == "judge"]
    assert total.cost_usd == pytest.approx(sum(line.tokens_in * 2 + line.tokens_out * 8 for line in judge_lines) / 1e6)
    assert total.cost_max_usd > total.cost_usd
    assert any("no price in judge.prices for embed-test" in note for note in plan.notes)
    # after the run, everything is in the cache: a rerun would cost nothing
    assert all(line.cached == line.requests for line in again.lines), [(x.metric, x.cached, x.requests) for x in again.lines]
    assert again.total().cost_usd == 0 and again.total().tokens_in == 0


def test_a_dry_run_for_a_live_agent_uses_stand_ins_and_says_so(tmp_path):
    data = tmp_path / "questions.json"
    data.write_text(json.dumps([{"id": f"q{i}", "query": f"Question {i}?", "reference_answer": f"Answer {i}."}
                                for i in range(5)]), encoding="utf-8")
    with Stub(chat=_chat) as stub:
        plan = ragmem.dry_run(str(data), agent={"type": "python", "target": "tests.sample_agents:echo"},
                              retriever={"top_k": 3}, metrics=["accuracy", "contextual_precision"],
                              judge={"type": "llm", "model": "m", "base_url": stub.base_url, "cache": False})
    assert stub.requests == []
    assert plan.agent_calls == 5 and "stand-ins for 5" in plan.answers
    lines = {line.metric: line for line in plan.lines}
    assert lines["contextual_precision"].requests == 5 * 3 and lines["contextual_precision"].estimated


def test_the_cli_prints_the_plan_and_exits_0_without_a_run(tmp_path, ragmem_main):
    data = _dataset(tmp_path, n=4)
    with Stub(chat=_chat) as stub:
        config = tmp_path / "llm.yaml"
        config.write_text(json.dumps({"experiment": "dry", "data": {"files": [{"path": data}]},
                                      "judge": {"type": "llm", "model": "judge-test", "base_url": stub.base_url,
                                                "cache_dir": str(tmp_path / "cache")},
                                      "metrics": ["accuracy", "faithfulness"]}), encoding="utf-8")
        proc = ragmem_main(["run", str(config), "--dry-run", "-o", str(tmp_path / "plan.json")], cwd=tmp_path)
        assert stub.requests == []
    assert proc.returncode == 0, proc.stderr
    assert "dry run of" in proc.stdout and "answers: recorded in the data" in proc.stdout
    row = [line for line in proc.stdout.splitlines() if line.startswith("answer_correctness")]
    assert row and row[0].split()[1:3] == ["judge", "4"]
    assert "no price in judge.prices for judge-test" in proc.stdout
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["total"]["requests"] == 4 + 4 + 8  # verdicts, claims, one support verdict per claim
    assert not (tmp_path / "mlruns").exists() and not (tmp_path / "summary.json").exists()


def test_a_dry_run_checks_the_endpoints_first(tmp_path, ragmem_main):
    from tests.conftest import free_port

    data = _dataset(tmp_path, n=2)
    proc = ragmem_main(["run", str(ROOT / "configs" / "default.yaml"), "--data", data, "--dry-run", "--set",
                        "judge.type=llm", "--set", "judge.model=m", "--set", f"judge.base_url=http://127.0.0.1:{free_port()}/v1"])
    assert proc.returncode == 2 and "judge.base_url" in proc.stderr and "Traceback" not in proc.stderr
