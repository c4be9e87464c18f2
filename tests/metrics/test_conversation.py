"""A conversation's metrics (ragmem.metrics.conversation): a worked example by hand; a simulation
whose every turn has a planted truth (what the answer did with the user's earlier fact, whether the
memory recalled the turn that held it), which the offline metrics must find turn by turn and the
intervals resample by session; the LLM judge's path through a local endpoint, paid once."""

from __future__ import annotations

import json
import math
import random

import pytest

import ragmem
from tests.openai_stub import data_block, Stub, user_text

WORKED = [
    {"id": "c1-1", "session_id": "c1", "query": "I live in Lyon and I have two cats.", "answer": "Noted: Lyon, two cats."},
    {"id": "c1-2", "session_id": "c1", "query": "How many cats do I have?", "answer": "Do you have cats?",
     "reference_answer": "You have two cats.",
     "history": [{"role": "user", "content": "I live in Lyon and I have two cats."},
                 {"role": "assistant", "content": "Noted: Lyon, two cats."}],
     "contexts": [{"text": "I live in Lyon and I have two cats.", "source": "memory_short", "id": "turn-0"}]},
    {"id": "c1-3", "session_id": "c1", "query": "Which city do I live in?", "answer": "You live in Paris.",
     "reference_answer": "You live in Lyon.",
     "history": [{"role": "user", "content": "I live in Lyon and I have two cats."},
                 {"role": "assistant", "content": "Noted: Lyon, two cats."},
                 {"role": "user", "content": "How many cats do I have?"}],
     "contexts": [{"text": "Cities of France", "source": "rag"}]},
    {"id": "c1-4", "session_id": "c1", "query": "Which city do I live in, again?", "answer": "You live in Lyon.",
     "reference_answer": "You live in Lyon.",
     "history": [{"role": "user", "content": "I live in Lyon and I have two cats."}],
     "contexts": [{"text": "I live in Lyon and I have two cats.", "source": "memory_long"}]},
]


def _write(tmp_path, records, name="turns.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return str(path)


def _nulls(values):
    return [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values]


def test_a_worked_conversation(tmp_path):
    result = ragmem.evaluate(_write(tmp_path, WORKED), track=False)
    table, summary = result.table, result.summary
    # c1-2 asks again for what the user said; c1-3 does not use the city the user gave; c1-4 does
    assert _nulls(table["knowledge_retention"]) == [None, 0.0, 0.0, 1.0]
    assert table["knowledge_retention_reason"].tolist()[1] == "asked again for what the user said earlier"
    assert table["knowledge_retention_reason"].tolist()[2] == "did not use what the user said earlier (lyon)"
    # turn 0 was needed each time (it holds the cats, the city); the memory held it for c1-2 (by id) and
    # c1-4 (by its text), not for c1-3 (a rag context only); "How many cats do I have?" was not needed
    assert _nulls(table["earlier_turn_recall"]) == [None, 1.0, 0.0, 1.0]
    assert _nulls(table["earlier_turns_needed"]) == [None, 1, 1, 1]
    assert result.metrics["knowledge_retention"] == pytest.approx(1 / 3)
    assert result.metrics["earlier_turn_recall"] == pytest.approx(2 / 3)
    # the first turn has no earlier turns: null and counted, never 0
    assert summary["coverage"]["knowledge_retention"] == {"scored": 3, "of": 4}
    assert summary["partial"]["knowledge_retention"] == "3 of 4 (1: no earlier turns (history))"
    assert "3 examples are turns of a conversation (history): knowledge_retention, earlier_turn_recall added" \
        in summary["notes"]
    # a selection given in the config is kept as it is; a dataset without history does not get them
    assert "knowledge_retention" not in ragmem.evaluate(_write(tmp_path, WORKED), track=False,
                                                        metrics=["faithfulness"]).metrics
    assert "knowledge_retention" not in ragmem.evaluate(_write(tmp_path, WORKED[:1], "one.jsonl"), track=False).metrics


ATTRIBUTES = ("sister", "bicycle", "employer", "dentist", "violin", "garden", "landlord", "neighbour", "guitar",
              "tractor", "kayak", "parrot", "lawyer", "piano", "teacher", "cousin", "boat", "tailor")


def simulate(sessions: int, seed: int, used: float = 0.6, asked: float = 0.2, recalled: float = 0.7):
    """Conversations of three turns in which the user states a fact each, then a question on one of
    them. The answer uses the fact (share ``used``), asks for it again (``asked``) or ignores it; the
    memory recalls the turn that holds it (share ``recalled``) or another one. Returns the records
    and each turn's truth: ``(knowledge_retention, earlier_turn_recall)`` by example id."""
    rng = random.Random(seed)
    records, truth = [], {}
    for s in range(sessions):
        attrs = rng.sample(ATTRIBUTES, 3)
        facts = [f"My {a} is Zor{s}x{k}." for k, a in enumerate(attrs)]
        history: list[dict] = []
        for k, fact in enumerate(facts):
            records.append({"id": f"s{s}-{k}", "session_id": f"s{s}", "query": fact, "answer": "Noted.",
                            **({"history": list(history)} if history else {})})
            truth[f"s{s}-{k}"] = (1.0, None) if history else (None, None)  # nothing asked: retained; none needed
            history += [{"role": "user", "content": fact}, {"role": "assistant", "content": "Noted."}]
        k = rng.randrange(3)
        draw = rng.random()
        answer, retained = ((f"Your {attrs[k]} is Zor{s}x{k}.", 1.0) if draw < used else
                            (f"What is your {attrs[k]}?", 0.0) if draw < used + asked else ("I am not sure.", 0.0))
        held = rng.random() < recalled
        memory = facts[k] if held else facts[(k + 1) % 3]
        records.append({"id": f"s{s}-q", "session_id": f"s{s}", "query": f"What is my {attrs[k]}?", "answer": answer,
                        "reference_answer": f"Your {attrs[k]} is Zor{s}x{k}.", "history": history,
                        "contexts": [{"text": "An unrelated document.", "source": "rag"},
                                     {"text": memory, "source": "memory_long"}]})
        truth[f"s{s}-q"] = (retained, float(held))
    return records, truth


def test_the_offline_metrics_find_the_planted_truth_of_every_turn(tmp_path):
    records, truth = simulate(60, seed=3)
    config = {"data": {"files": [{"path": _write(tmp_path, records)}], "chunk_size": 50},
              "stats": {"cluster_by": "session_id", "resamples": 500}}
    result = ragmem.evaluate(None, config, track=False)
    table = result.table.set_index("id")
    assert len(table) == 240  # streamed in chunks of 50: the sums add up
    for example_id, (retained, recalled) in truth.items():
        assert _nulls([table.loc[example_id, "knowledge_retention"]]) == [retained], example_id
        assert _nulls([table.loc[example_id, "earlier_turn_recall"]]) == [recalled], example_id
    retained = [r for r, _ in truth.values() if r is not None]
    recalled = [r for _, r in truth.values() if r is not None]
    assert result.metrics["knowledge_retention"] == pytest.approx(sum(retained) / len(retained))
    assert result.metrics["earlier_turn_recall"] == pytest.approx(sum(recalled) / len(recalled))
    # the session is the unit the intervals resample, and they hold the value
    assert (result.summary["clusters"]["by"], result.summary["clusters"]["n"]) == ("session_id", 60)
    low, high = result.summary["ci"]["earlier_turn_recall"]
    assert low < result.metrics["earlier_turn_recall"] < high
    assert result.summary["coverage"]["earlier_turn_recall"] == {"scored": 60, "of": 240}


def _judge(request: dict) -> dict:
    """A judge that knows the simulation: the answer retains the fact unless it asks or is unsure; a
    turn is needed when it names what the question asks about."""
    text = user_text(request)
    if "retains what the user stated earlier" in text:
        answer = data_block(request, "answer")
        return {"verdict": "no" if "?" in answer or "not sure" in answer else "yes", "reason": "scripted"}
    if "helps answer the question" not in text:  # (pass_rate's verdict, always computed)
        return {"verdict": "yes", "reason": "scripted"}
    attribute = data_block(request, "question").removeprefix("What is my ").rstrip("?")
    return {"verdict": "yes" if f"My {attribute} is" in data_block(request, "context") else "no", "reason": "scripted"}


def test_the_llm_judge_decides_retention_and_the_needed_turns_and_is_paid_once(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_TEST_KEY", "sk-test")
    records, truth = simulate(8, seed=5)
    path = _write(tmp_path, records)
    with Stub(chat=_judge) as stub:
        judge = {"type": "llm", "model": "judge-test", "base_url": stub.base_url, "api_key_env": "RAGMEM_TEST_KEY",
                 "cache_dir": str(tmp_path / "cache"), "retry_backoff_s": 0.01}
        metrics = ["knowledge_retention", "earlier_turn_recall"]
        result = ragmem.evaluate(path, track=False, judge=judge, metrics=metrics)
        asked = [r for r in stub.requests if "retains what the user stated earlier" in user_text(r)]
        # one retention verdict per turn with earlier user turns (3 of 4 per session), one relevance
        # verdict per earlier user turn of each (1 + 2 + 3 per session)
        assert len(asked) == 8 * 3
        relevance = [r for r in stub.requests if "retains what the user stated earlier" not in user_text(r)
                     and "helps answer the question" in user_text(r)]
        assert len(relevance) == 8 * 6
        table = result.table.set_index("id")
        for example_id, (retained, recalled) in truth.items():
            assert _nulls([table.loc[example_id, "knowledge_retention"]]) == [retained], example_id
            assert _nulls([table.loc[example_id, "earlier_turn_recall"]]) == [recalled], example_id
        # (the requests arrive in any order: the longest conversation is a session's last turn)
        conversation = max((data_block(r, "conversation") for r in asked), key=len)
        assert conversation.startswith("user: My ") and "\nassistant: Noted.\n" in conversation
        before = len(stub.requests)
        again = ragmem.evaluate(path, track=False, judge=judge, metrics=metrics)
        assert len(stub.requests) == before  # the cache: nothing asked twice
        assert again.metrics["knowledge_retention"] == result.metrics["knowledge_retention"]
