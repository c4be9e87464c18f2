"""answer_relevancy from the chat model alone (``rag_metrics.relevancy: statements``, what ``auto``
takes without an embeddings endpoint): a worked example through a local OpenAI-compatible server and
the real ``openai`` client, its requests, its edge cases, its signature and the settings refused."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import ragmem
from ragmem.config.loading import RunConfig
from ragmem.errors import ConfigError
from ragmem.metrics import relevancy
from tests.openai_stub import Stub, data_block, user_text

#: the statements each answer makes, and whether each addresses "What is the capital of France?"
STATEMENTS = {
    "Paris is the capital of France. I love croissants.": [("Paris is the capital of France.", "yes"),
                                                           ("I love croissants.", "no")],
    "I don't know.": [("I don't know.", "no")],
    "Paris. It has been the capital since 987. It lies on the Seine. Lyon is larger in area.": [
        ("Paris is the capital of France.", "yes"), ("Paris has been the capital since 987.", "yes"),
        ("Paris lies on the Seine.", "yes"), ("Lyon is larger in area.", "no")],
    "...": [],  # (a model that finds nothing said)
}
VERDICTS = {s: v for pairs in STATEMENTS.values() for s, v in pairs}


def _chat(request):
    text = user_text(request)
    if "Break the answer into the statements" in text:
        return {"statements": [s for s, _ in STATEMENTS[data_block(request, "answer")]]}
    if "Decide whether the statement" in text:
        assert data_block(request, "question") == "What is the capital of France?"
        return {"verdict": VERDICTS[data_block(request, "statement")], "reason": "scripted"}
    raise AssertionError(f"unexpected request: {text[:80]}")


def _data(tmp_path):
    rows = [{"id": f"a{i}", "query": "What is the capital of France?", "generated_answer": answer}
            for i, answer in enumerate(STATEMENTS)]
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return str(path)


def _judge(stub, tmp_path, **extra):
    return {"type": "llm", "model": "judge-test", "base_url": stub.base_url, "api_key_env": "RAGMEM_TEST_KEY",
            "cache_dir": str(tmp_path / "cache"), "retry_backoff_s": 0.01, "timeout_s": 5, **extra}


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("RAGMEM_TEST_KEY", "sk-test-relevancy")


def test_the_chat_model_alone_scores_the_share_of_statements_that_address_the_question(tmp_path):
    with Stub(chat=_chat) as stub:  # (no embeddings section: auto takes statements)
        result = ragmem.evaluate(_data(tmp_path), track=False, judge=_judge(stub, tmp_path),
                                 metrics=["answer_relevancy"], rag_metrics={"threshold": 0.5})
    scores = result.table["answer_relevancy"].tolist()
    assert scores[:3] == [0.5, 0.0, 0.75]  # 1 of 2; a refusal: 0 of 1; 3 of 4
    assert pd.isna(scores[3]) and result.summary["counts"]["undefined_answer_relevancy"] == 1  # no statement: zero_division (null)
    assert result.metrics["answer_relevancy"] == pytest.approx((0.5 + 0 + 0.75) / 3)
    assert result.metrics["answer_relevancy_failures"] == 0
    assert result.params["rag_metrics.relevancy.signature"] == "statements|judge|as:deepeval"
    tasks = [("statements" if "Break the answer" in user_text(r) else "verdict") for r in stub.requests]
    # one request lists an answer, one judges a statement: 7 statements, one of them twice with the same question
    # (sent once: identical requests of a batch are asked once)
    assert tasks.count("statements") == 4 and tasks.count("verdict") == 6
    assert not any("embeddings" in p for p in stub.paths)


def test_a_failed_listing_is_that_examples_failure_never_a_zero(tmp_path):
    def chat(request):
        if "Your reply was invalid" in user_text(request) or (
                "Break the answer" in user_text(request) and "croissants" in data_block(request, "answer")):
            return {"not": "a list"}  # invalid twice (the repair too): the example fails with its reason
        return _chat(request)

    with Stub(chat=chat) as stub:
        result = ragmem.evaluate(_data(tmp_path), track=False, judge=_judge(stub, tmp_path, max_retries=0),
                                 metrics=["answer_relevancy"])
    assert result.table["answer_relevancy"].isna()[0]
    assert "statements" in str(result.table.loc[0, "answer_relevancy_error"])
    assert result.metrics["answer_relevancy_failures"] == 1 and result.table.loc[1, "answer_relevancy"] == 0.0


def test_the_way_follows_the_endpoints_and_is_named_in_the_signature():
    assert relevancy.signature(True, "bge-m3", "auto", 3) == "questions:3|embeddings:bge-m3"
    assert relevancy.signature(True, None, "auto", 3) == "statements|judge|as:deepeval"
    assert relevancy.signature(True, "bge-m3", "statements", 3) == "statements|judge|as:deepeval"
    assert relevancy.signature(False, None, "auto", 3) == "keyword cosine"
    assert relevancy.signature(False, "bge-m3", "auto", 3) == "embedding cosine|embeddings:bge-m3"


@pytest.mark.parametrize("settings, message", [
    ({"judge": {"type": "llm", "model": "m", "base_url": "http://127.0.0.1:9/v1"},
      "rag_metrics": {"relevancy": "questions"}}, "rag_metrics.relevancy: questions compares the embeddings"),
    ({"rag_metrics": {"relevancy": "statements"}}, "rag_metrics.relevancy: statements asks an LLM judge"),
])
def test_a_way_its_endpoints_cannot_score_is_refused_before_any_call(settings, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig.from_dict(settings)
