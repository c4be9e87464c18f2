"""The LLM judge and the LLM-based RAG metrics through a local OpenAI-compatible server and the real
``openai`` client: worked examples, retries, repair, failures, cache, cost, secrets."""

import json
import random
from pathlib import Path

import pytest

import ragmem
from tests.openai_stub import Stub, data_block, user_text
from tests.conftest import ROOT

SECRET = "sk-test-SECRET-9f8e7d6c"


def judge_settings(stub, tmp_path, **extra):
    return {"type": "llm", "model": "judge-test", "base_url": stub.base_url, "api_key_env": "RAGMEM_TEST_KEY",
            "cache_dir": str(tmp_path / "cache"), "retry_backoff_s": 0.01, "timeout_s": 2, **extra}


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("RAGMEM_TEST_KEY", SECRET)


def write(tmp_path, records, name="data.json"):
    path = tmp_path / name
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    return str(path)


def task_of(request):
    text = user_text(request)
    if "Decide whether the context passage" in text:
        return "chunk_relevance"
    if "Decide whether the generated answer" in text:
        return "answer_correctness"
    if "List the named entities" in text:
        return "entities"
    if "Write one question" in text:
        return "question"
    if "Break the answer into the statements" in text:
        return "statements"
    if "Decide whether the statement" in text:
        return "statement_relevance"
    if "Break the answer into" in text:
        return "claims"
    if "Decide whether the claim" in text:
        return "claim_support"
    return "repair"


def test_contextual_precision_worked_example(tmp_path):
    def chat(request):
        assert task_of(request) in ("chunk_relevance", "answer_correctness")
        if task_of(request) == "answer_correctness":
            return {"verdict": "yes", "reason": "matches"}
        return {"verdict": "yes" if data_block(request, "context").startswith("RELEVANT") else "no", "reason": "r"}

    data = write(tmp_path, [{"query": "q", "reference_answer": "ref", "generated_answer": "ans",
                             "context": ["RELEVANT one", "noise", "RELEVANT two"]}])
    with Stub(chat=chat) as stub:
        result = ragmem.evaluate(data, track=False, judge=judge_settings(stub, tmp_path),
                                 metrics=["contextual_precision"])
    assert result.metrics["contextual_precision"] == pytest.approx((1 + 2 / 3) / 2)
    assert round(result.metrics["contextual_precision"], 4) == 0.8333


TAJ_REFERENCE = ("The Taj Mahal is an ivory-white marble mausoleum on the right bank of the river Yamuna in the "
                 "Indian city of Agra. It was commissioned in 1631 by the Mughal emperor Shah Jahan to house the "
                 "tomb of his favourite wife, Mumtaz Mahal.")
TAJ_CONTEXT_1 = ("The Taj Mahal is a symbol of love and architectural marvel located in Agra, India. It was built "
                 "by the Mughal emperor Shah Jahan in memory of his beloved wife, Mumtaz Mahal.")
TAJ_CONTEXT_2 = ("The Taj Mahal is a UNESCO World Heritage Site and is visited by millions of tourists every year. "
                 "It is in India.")
TAJ_ENTITIES = {TAJ_REFERENCE: ["Taj Mahal", "Yamuna", "Agra", "1631", "Shah Jahan", "Mumtaz Mahal"],
                TAJ_CONTEXT_1: ["Taj Mahal", "Agra", "Shah Jahan", "Mumtaz Mahal", "India"],
                TAJ_CONTEXT_2: ["Taj Mahal", "UNESCO", "India"]}


def test_context_entity_recall_worked_example(tmp_path):
    def chat(request):
        if task_of(request) == "answer_correctness":
            return {"verdict": "yes", "reason": "ok"}
        return {"entities": TAJ_ENTITIES[data_block(request, "text")]}

    data = write(tmp_path, [
        {"id": "c1", "query": "Where is the Taj Mahal?", "reference_answer": TAJ_REFERENCE, "generated_answer": "Agra",
         "context": [TAJ_CONTEXT_1]},
        {"id": "c2", "query": "Where is the Taj Mahal?", "reference_answer": TAJ_REFERENCE, "generated_answer": "Agra",
         "context": [TAJ_CONTEXT_2]}])
    with Stub(chat=chat) as stub:
        result = ragmem.evaluate(data, track=False, judge=judge_settings(stub, tmp_path),
                                 metrics=["context_entity_recall"])
    assert list(result.table["context_entity_recall"]) == pytest.approx([4 / 6, 1 / 6])


EMBEDDINGS = {"What does a vector database store?": [1.0, 0.0, 0.0],
              "What is stored in a vector database?": [0.8, 0.6, 0.0],
              "Which data do vector databases keep?": [0.6, 0.8, 0.0],
              "Is a vector database a file system?": [0.0, 0.0, 1.0]}


def test_answer_relevancy_worked_example_and_chinese_prompts(tmp_path):
    generated = ["What is stored in a vector database?", "Which data do vector databases keep?",
                 "Is a vector database a file system?"]
    languages = []

    def chat(request):
        if task_of(request) == "answer_correctness":
            return {"verdict": "yes", "reason": "ok"}
        text = user_text(request)
        languages.append("Chinese" if "in Chinese" in text else "English")
        if "向量" in data_block(request, "answer"):
            return {"question": "向量数据库存储什么？", "noncommittal": 0}
        attempt = int(text.split("(attempt ")[1].split(" of")[0])
        return {"question": generated[attempt - 1], "noncommittal": 0}

    data = write(tmp_path, [
        {"id": "en", "query": "What does a vector database store?", "reference_answer": "Embeddings.",
         "generated_answer": "A vector database stores embeddings."},
        {"id": "zh", "query": "What does a vector database store?", "reference_answer": "向量。",
         "generated_answer": "向量数据库存储向量。"}])
    embed = lambda text: EMBEDDINGS.get(text, [0.0, 1.0, 0.0])  # noqa: E731
    with Stub(chat=chat, embed=embed) as stub:
        result = ragmem.evaluate(data, track=False, judge=judge_settings(stub, tmp_path),
                                 embeddings={"model": "embed-test", "base_url": stub.base_url,
                                             "cache_dir": str(tmp_path / "ecache")},
                                 metrics=["answer_relevancy"])
    q = EMBEDDINGS["What does a vector database store?"]
    expected = sum(sum(a * b for a, b in zip(q, EMBEDDINGS[g])) for g in generated) / 3  # unit vectors
    assert result.table.loc[0, "answer_relevancy"] == pytest.approx(expected)
    assert result.table.loc[1, "answer_relevancy"] == pytest.approx(0.0)  # [0,1,0] vs [1,0,0]
    assert languages.count("Chinese") == 3 and languages.count("English") == 3  # a Chinese answer gets Chinese questions


def test_noncommittal_answers_score_zero(tmp_path):
    def chat(request):
        if task_of(request) == "answer_correctness":
            return {"verdict": "no", "reason": "evasive"}
        return {"question": "What?", "noncommittal": 1}

    data = write(tmp_path, [{"query": "What does a vector database store?", "reference_answer": "Embeddings.",
                             "generated_answer": "I don't know."}])
    with Stub(chat=chat, embed=lambda t: [1.0, 0.0]) as stub:
        result = ragmem.evaluate(data, track=False, judge=judge_settings(stub, tmp_path),
                                 embeddings={"model": "e", "base_url": stub.base_url, "cache_dir": str(tmp_path / "e")},
                                 metrics=["answer_relevancy"])
    assert result.metrics["answer_relevancy"] == 0.0


def _scripted_chat(request):
    task = task_of(request)
    if task == "answer_correctness":
        return {"verdict": "yes" if "good" in data_block(request, "answer") else "no", "reason": "scripted"}
    if task == "chunk_relevance":
        return {"verdict": "yes", "reason": "scripted"}
    if task == "entities":
        return {"entities": [w for w in data_block(request, "text").split() if w[:1].isupper()]}
    if task == "claims":
        return {"claims": [s.strip() for s in data_block(request, "answer").split(".") if s.strip()]}
    if task == "claim_support":
        return {"verdict": "yes", "reason": "scripted"}
    return {"verdict": "yes", "reason": "scripted"}


def _dataset(tmp_path, n=20):
    return write(tmp_path, [{"id": f"e{i}", "query": f"Question {i} about Qdrant?", "reference_answer": f"Qdrant stores vectors {i}.",
                             "generated_answer": ("good answer. " if i % 2 else "bad answer. ") + f"Qdrant {i}.",
                             "label": i % 2, "context": [f"Qdrant stores vectors {i}", "Unrelated Milvus text"]}
                            for i in range(n)])


LLM_METRICS = ["accuracy", "f1", "answer_correctness", "contextual_precision", "context_entity_recall", "faithfulness"]


def test_thirty_percent_failures_complete_with_every_item_scored_or_failed(tmp_path):
    rng = random.Random(11)
    modes = ["429", "500", "truncated", "timeout"]
    failing = {}

    def fail(number):
        if number not in failing:
            failing[number] = rng.choice(modes) if rng.random() < 0.3 else None
        return failing[number]

    with Stub(chat=_scripted_chat, fail=fail) as stub:
        result = ragmem.evaluate(_dataset(tmp_path), track=False, metrics=LLM_METRICS,
                                 judge=judge_settings(stub, tmp_path, max_retries=1, timeout_s=0.5, max_concurrency=4))
    n = len(result.table)
    for metric in ("answer_correctness", "contextual_precision", "context_entity_recall", "faithfulness"):
        scored = int(result.table[metric].notna().sum())
        failed = int(result.table[f"{metric}_error"].notna().sum())
        assert scored + failed == n, metric
        assert result.metrics[f"{metric}_failures"] == failed
        assert all(isinstance(e, str) and e for e in result.table[f"{metric}_error"].dropna())
    assert result.metrics["judge_failures"] >= 1 and result.metrics["judge_calls"] > result.metrics["judge_failures"]
    reasons = " ".join(result.table["answer_correctness_error"].dropna())
    assert any(word in reasons for word in ("HTTP 429", "HTTP 500", "HTTP 503", "timed out", "invalid reply"))
    # the verdicts that failed are not zeros: they are left out of the confusion counts
    judged = int(result.table["verdict"].notna().sum())
    assert result.metrics["n_classified"] == judged


def test_retry_after_repair_fallback_cache_and_cost(tmp_path, monkeypatch):
    import asyncio
    import types

    import ragmem.clients.calls

    waits = []  # the back-off the client asked for (what it waited is not asserted: no timing tests)

    async def sleep(delay, *args, **kwargs):
        waits.append(delay)
        await asyncio.sleep(delay, *args, **kwargs)

    proxy = types.SimpleNamespace(**{n: getattr(asyncio, n) for n in dir(asyncio) if not n.startswith("__")})
    proxy.sleep = sleep
    monkeypatch.setattr(ragmem.clients.calls, "asyncio", proxy)
    calls = {"n": 0}

    def chat(request):
        calls["n"] += 1
        if calls["n"] == 1:
            return "this is not json"            # first reply invalid -> one repair request
        return {"verdict": "yes", "reason": "fine"}

    data = write(tmp_path, [{"query": "q", "reference_answer": "r", "generated_answer": "a", "context": ["c"]}])
    with Stub(chat=chat, fail=lambda n: "429" if n == 1 else None, reject_json_schema=True, retry_after="1") as stub:
        settings = judge_settings(stub, tmp_path, prices={"judge-test": {"input": 2.0, "output": 8.0}})
        first = ragmem.evaluate(data, track=False, judge=settings, metrics=["answer_correctness"])
        formats = [(r.get("response_format") or {}).get("type") for r in stub.requests]
        sent_first = len(stub.requests)
        second = ragmem.evaluate(data, track=False, judge=settings, metrics=["answer_correctness"])
        sent_second = len(stub.requests) - sent_first
    assert waits[0] == 1.0                                    # Retry-After: 1 was honoured
    assert formats[0] == "json_schema" and "json_object" in formats  # rejected schema -> json_object
    assert first.metrics["answer_correctness"] == 1.0 and first.table.loc[0, "verdict"] == 1
    # 429, 400 (json_schema rejected), invalid reply, repair -> 4 requests; tokens from the 2 replies
    assert sent_first == 4 and first.metrics["judge_tokens_in"] == 200 and first.metrics["judge_tokens_out"] == 20
    assert first.metrics["judge_cost_usd"] == pytest.approx((200 * 2.0 + 20 * 8.0) / 1e6)
    assert sent_second == 0 and second.metrics["judge_calls"] == 0 and second.metrics["judge_cache_hits"] == 1
    assert second.metrics["judge_cache_hit_rate"] == 1.0
    assert {k.lower(): v for k, v in stub.headers[0].items()}["authorization"] == f"Bearer {SECRET}"


def test_second_identical_run_makes_no_requests_and_models_do_not_share_cache(tmp_path):
    data = _dataset(tmp_path, n=6)
    with Stub(chat=_scripted_chat) as stub:
        settings = judge_settings(stub, tmp_path)
        first = ragmem.evaluate(data, track=False, judge=settings, metrics=LLM_METRICS)
        after_first = len(stub.requests)
        second = ragmem.evaluate(data, track=False, judge=settings, metrics=LLM_METRICS)
        assert len(stub.requests) == after_first              # zero new requests
        ragmem.evaluate(data, track=False, judge={**settings, "model": "another-model"}, metrics=["answer_correctness"])
        assert len(stub.requests) == after_first + 6          # another model: its own entries
    assert first.metrics["judge_calls"] == after_first and second.metrics["judge_calls"] == 0
    for metric in ("answer_correctness", "contextual_precision", "context_entity_recall", "faithfulness"):
        assert first.metrics[metric] == second.metrics[metric]


def test_llm_verdict_replaces_keyword_verdict_with_kappa_and_agreement(tmp_path):
    data = _dataset(tmp_path, n=10)
    with Stub(chat=_scripted_chat) as stub:
        result = ragmem.evaluate(data, track=False, judge=judge_settings(stub, tmp_path),
                                 metrics=["accuracy", "answer_correctness"])
    # the scripted judge says yes exactly for the "good" answers, which are the label-1 examples
    assert result.metrics["accuracy"] == 1.0 and result.metrics["judge_label_kappa"] == pytest.approx(1.0)
    assert "keyword_llm_agreement" in result.metrics and "keyword_verdict" in result.table


def test_secret_never_reaches_mlruns(tmp_path, monkeypatch, shared_store):
    monkeypatch.chdir(tmp_path)
    data = _dataset(tmp_path, n=4)
    with Stub(chat=_scripted_chat) as stub:
        result = ragmem.evaluate(data, judge=judge_settings(stub, tmp_path), metrics=LLM_METRICS,
                                 tracking=shared_store, experiment="secret")
    assert result.run_id and result.params["judge.api_key_env"] == "RAGMEM_TEST_KEY"
    from mlflow import MlflowClient

    # the store's database and this run's artifacts (the shared store's other runs are other tests')
    artifacts = Path(MlflowClient(shared_store["uri"]).get_run(result.run_id).info.artifact_uri.removeprefix("file://"))
    files = [Path(shared_store["uri"].removeprefix("sqlite:///"))] + [p for p in artifacts.rglob("*") if p.is_file()]
    assert len(files) > 3 and not any(SECRET.encode() in p.read_bytes() for p in files)
    assert result.params["judge.prompt_hash"] and result.params["judge.model"] == "judge-test"


def test_offline_modes_need_no_llm():
    result = ragmem.evaluate(str(ROOT / "ragmem/datasets/demo_bilingual.json"),
                             track=False, metrics=["answer_correctness", "contextual_precision", "answer_relevancy",
                                                   "context_entity_recall", "faithfulness"])
    for metric in ("answer_correctness", "contextual_precision", "answer_relevancy", "context_entity_recall", "faithfulness"):
        assert 0.0 <= result.metrics[metric] <= 1.0 and result.metrics[f"{metric}_failures"] == 0
    assert "judge_calls" not in result.metrics


def test_offline_entity_extractor():
    from ragmem.metrics.rag import OfflineEntities, entity_recall
    from ragmem.text.keywords import KeywordExtractor

    extract = OfflineEntities(KeywordExtractor().stopwords)
    assert {"taj mahal", "agra", "shah jahan", "mumtaz mahal", "1631"} <= extract(TAJ_REFERENCE)
    zh = extract("2023年，马云在杭州创办了阿里巴巴。")
    assert {"马云", "杭州"} <= zh
    assert entity_recall({"a", "b"}, {"a", "c"}) == 0.5 and entity_recall({"a"}, set()) is None


def test_replies_that_name_another_model_are_one_line_a_tag_and_a_price_note(tmp_path, shared_store):
    """A server with one model loaded (llama.cpp, Ollama) answers any model name as that model: the
    run says which model answered, tags it, and says how the cost was priced, naming both."""
    data = write(tmp_path, [{"query": "q", "reference_answer": "r", "generated_answer": "a", "context": ["c"]}])
    tracking = {"uri": shared_store["uri"], "artifact_root": shared_store["artifact_root"]}
    with Stub(chat=lambda request: {"verdict": "yes", "reason": "fine"}, serves="smollm2") as stub:
        settings = judge_settings(stub, tmp_path, model="gpt-4o-mini", prices={"gpt-4o-mini": {"input": 0.15, "output": 0.6}})
        result = ragmem.evaluate(data, tracking=tracking, experiment="replied-model", judge=settings,
                                 metrics=["answer_correctness"])
    (line,) = [n for n in result.summary["notes"] if "replies name" in n]
    assert line.startswith("judge.model is 'gpt-4o-mini' but the endpoint's replies name 'smollm2' (1 of 1 replies)")
    assert "judge_cost_usd is priced as 'gpt-4o-mini' (judge.prices), not as 'smollm2'" in line
    assert result.summary["replied_models"] == {"judge": ["smollm2"]} and result.params["judge.model"] == "gpt-4o-mini"
    from mlflow import MlflowClient

    tags = MlflowClient(shared_store["uri"]).get_run(result.run_id).data.tags
    assert tags["ragmem.judge.replied_model"] == "smollm2"
    # a dated snapshot of the model asked for is the same model: nothing said
    with Stub(chat=lambda request: {"verdict": "yes", "reason": "fine"}, serves="gpt-4o-mini-2024-07-18") as stub:
        settings = judge_settings(stub, tmp_path, model="gpt-4o-mini", cache=False)
        quiet = ragmem.evaluate(data, track=False, judge=settings, metrics=["answer_correctness"])
    assert not [n for n in quiet.summary["notes"] if "replies name" in n] and "replied_models" not in quiet.summary


def test_a_rerun_says_how_many_failed_requests_it_sent_again(tmp_path):
    """A failure is never cached, so an identical rerun asks it again and its numbers may move: the
    rerun says so, with how many; a third run, with everything cached, says nothing."""
    data = _dataset(tmp_path, n=6)
    flaky = {"first": True}

    def chat(request):  # the first run: every faithfulness claim list is no JSON, even after the repair
        if flaky["first"] and task_of(request) in ("claims", "repair"):
            return "no json"
        return _scripted_chat(request)

    with Stub(chat=chat) as stub:
        settings = judge_settings(stub, tmp_path)
        first = ragmem.evaluate(data, track=False, judge=settings, metrics=["faithfulness"])
        flaky["first"] = False
        second = ragmem.evaluate(data, track=False, judge=settings, metrics=["faithfulness"])
        third = ragmem.evaluate(data, track=False, judge=settings, metrics=["faithfulness"])
    assert first.metrics["faithfulness_failures"] == 6 and not [n for n in first.summary["notes"] if "sent again" in n]
    (line,) = [n for n in second.summary["notes"] if "sent again" in n]
    assert line.startswith("judge: 6 requests that failed in an earlier run were sent again")
    assert second.metrics["faithfulness_failures"] == 0 and second.metrics["faithfulness"] is not None
    assert not [n for n in third.summary["notes"] if "sent again" in n] and third.metrics["judge_calls"] == 0


def test_a_verdict_given_twice_is_an_invalid_reply_and_a_run_of_only_failed_verdicts_says_so():
    """``{"verdict": "no", "verdict": "yes"}`` read as its last key was a pass: it is an invalid reply
    (repaired once, then a recorded failure); a run in which every verdict failed has the one line
    the command ends with, exit 3 (through the command: tests/e2e/test_nothing_measured.py)."""
    from ragmem.run.summary import nothing_measured

    def chat(request):
        return '{"verdict": "no", "verdict": "yes", "reason": "both"}'

    import tempfile
    with tempfile.TemporaryDirectory() as folder, Stub(chat=chat) as stub:
        data = _dataset(Path(folder), n=4)
        result = ragmem.evaluate(data, track=False, judge=judge_settings(stub, Path(folder)), metrics=["pass_rate"])
    assert result.metrics["pass_rate"] is None and result.summary["counts"]["n_judge_errors"] == 4
    assert set(result.table["judge_error"]) == {"invalid reply after one repair: invalid reply: key 'verdict' given twice"}
    assert nothing_measured(result.summary) == "every judge verdict failed (4 of 4 answered examples): nothing was judged"
    assert nothing_measured({**result.summary, "counts": {**result.summary["counts"], "n_judge_errors": 3}}) is None


def test_a_reply_holding_half_a_character_pair_is_an_invalid_reply_and_the_tracked_run_is_written(tmp_path, shared_store):
    """A judge whose JSON escapes half of a UTF-16 pair (``\\ud800``): its reason could be written to
    no file, and the tracked run died writing its table after the judge was paid (UnicodeEncodeError).
    Now an invalid reply, repaired once, then each example's recorded failure; the run is logged."""
    from mlflow import MlflowClient

    def chat(request):
        return '{"verdict": "yes", "reason": "half \\ud800 of a pair"}'

    with Stub(chat=chat) as stub:
        result = ragmem.evaluate(_dataset(tmp_path, n=4), judge=judge_settings(stub, tmp_path), metrics=["pass_rate"],
                                 experiment="half-pairs", tracking=shared_store)
    assert result.summary["counts"]["n_judge_errors"] == 4 and result.metrics["pass_rate"] is None
    assert set(result.table["judge_error"]) == {"invalid reply after one repair: invalid reply: a lone surrogate U+D800 "
                                                "in it (half of a character pair: not Unicode text)"}
    run = MlflowClient(shared_store["uri"]).get_run(result.run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["count/n_judge_errors"] == 4
