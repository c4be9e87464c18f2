"""Production traffic: examples with a query and an answer only. What a metric needs and an example
lacks makes it null for that example, counted with the reason, never 0 and never a rejected file
(ragmem.metrics.needs); ``ragmem validate`` says per metric how many records can feed it."""

from __future__ import annotations

import json
import math

import pytest

import ragmem
from ragmem.report import terminal

N, WITH_CONTEXTS = 20, 12


def _traffic(tmp_path, references: int = 0):
    rows = []
    for i in range(N):
        row = {"id": f"t{i}", "query": f"What does the memory layer keep for user {i}?",
               "answer": f"It keeps the preferences of user {i}: the language and the time zone."}
        if i < WITH_CONTEXTS:
            row["contexts"] = [f"The memory layer keeps the preferences of user {i}: language and time zone.", "Other."]
        if i >= N - references:
            row["reference"] = f"The language and the time zone of user {i}."
        rows.append(row)
    path = tmp_path / "traffic.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


GENERATION = ("bleu", "bleu_1", "chrf", "rouge_1", "rouge_2", "rouge_l", "token_f1", "exact_match")


def test_twenty_records_with_only_a_query_and_an_answer_get_what_they_can_feed(tmp_path, capsys):
    held = ragmem.evaluate(_traffic(tmp_path), track=False)
    streamed = ragmem.evaluate(None, {"data": {"files": [{"path": _traffic(tmp_path)}], "chunk_size": 6}}, track=False)
    metrics, summary, table = held.metrics, held.summary, held.table
    # the context-needing metrics: on the 12 examples with contexts, null and counted on the 8 others
    for name in ("faithfulness", "avg_coverage"):
        assert summary["coverage"][name] == {"scored": WITH_CONTEXTS, "of": N}
        assert summary["partial"][name] == f"{WITH_CONTEXTS} of {N} ({N - WITH_CONTEXTS}: no contexts)"
        column = "coverage" if name == "avg_coverage" else name
        values = table[column].tolist()
        assert all(not math.isnan(v) for v in values[:WITH_CONTEXTS])
        assert all(v is None or math.isnan(v) for v in values[WITH_CONTEXTS:])  # null, never 0
        assert metrics[name] == pytest.approx(sum(values[:WITH_CONTEXTS]) / WITH_CONTEXTS)
    assert summary["coverage"]["answer_relevancy"] == {"scored": N, "of": N}  # needs nothing more
    # no example has a reference: by default, only the metrics that need none are selected (and said so)
    for name in (*GENERATION, "reference_coverage", "context_entity_recall", "contextual_precision",
                 "answer_correctness", "hit_rate_at_5"):
        assert name not in metrics, name
    assert metrics["pass_rate"] is None  # (always computed: null, never 0)
    assert "no example was judged (no example has a reference answer): pass_rate not computed; judge.type llm judges an answer without one, on its contexts" in summary["notes"]
    assert any(n.startswith("no example has a reference answer: the metrics that need none by default (")
               for n in summary["notes"])
    # asked for by name, a reference-needing metric is computed, and null
    asked = ragmem.evaluate(_traffic(tmp_path), track=False, metrics=["rouge_l", "faithfulness"]).metrics
    assert asked["rouge_l"] is None and asked["faithfulness"] == pytest.approx(metrics["faithfulness"])
    # streamed in chunks of 6: the same counts and values
    assert streamed.summary["coverage"] == summary["coverage"] and streamed.summary["partial"] == summary["partial"]
    assert streamed.metrics["faithfulness"] == pytest.approx(metrics["faithfulness"])
    terminal.print_summary(summary, stored=False)
    shown = " ".join(capsys.readouterr().out.split())
    assert "faithfulness (partial)" in shown and f"{WITH_CONTEXTS} of {N} ({N - WITH_CONTEXTS}: no contexts)" in shown


def test_references_on_some_examples_feed_the_generation_metrics_and_the_judge_on_those(tmp_path):
    result = ragmem.evaluate(_traffic(tmp_path, references=5), track=False)
    summary = result.summary
    for name in ("rouge_l", "token_f1"):
        assert summary["coverage"][name] == {"scored": 5, "of": N}
        assert summary["partial"][name] == f"5 of {N} (15: no reference answer)"
    assert summary["coverage"]["pass_rate"] == {"scored": 5, "of": N} and result.metrics["n_judged"] == 5
    assert summary["partial"]["pass_rate"] == f"5 of {N} (15: no reference answer)"
    assert ("pass_rate: 15 examples have no reference answer, which the keyword judge needs: not judged "
            "(judge.type: llm gives a reference-free verdict)") in summary["notes"]
    assert result.table["judge_error"].isna().all()  # not asked is not a failed judgement
    assert result.metrics["rouge_l"] is not None


def test_validate_counts_per_metric_the_records_that_can_feed_it(tmp_path, ragmem_main):
    done = ragmem_main(["validate", _traffic(tmp_path, references=5)])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("traffic.jsonl: 20 records, all valid")
    assert lines[1] == "what each metric can be computed on (records that hold what it needs):"
    assert lines[2] == "  20 of 20  answer_relevancy (a query and an answer)"
    assert lines[3] == "  12 of 20  faithfulness, context_relevance, avg_coverage (contexts)"
    assert lines[4].startswith("  5 of 20   bleu, chrf, rouge_*") and lines[4].endswith("(a reference answer)")
    assert lines[5].startswith("  0 of 20   context_entity_recall")  # the 5 with a reference have no contexts
    assert lines[6].startswith("  0 of 20   contextual_precision (contexts, and gold context ids or a reference")
    assert lines[7].startswith("  5 of 20   hit_rate_at_k, mrr_at_k") and lines[7].endswith("(gold context ids, or a reference answer for offline relevance)")
    assert lines[8] == "  0 of 20   accuracy, precision, recall, f1, judge_label_kappa (a label)"


def test_the_llm_judge_gives_a_reference_free_verdict_on_the_contexts(tmp_path, monkeypatch):
    from tests.openai_stub import Stub, user_text

    monkeypatch.setenv("RAGMEM_TEST_KEY", "k")
    asked = []

    def chat(request):
        text = user_text(request)
        asked.append("supported" if "supported by the contexts" in text else "reference")
        return {"verdict": "yes", "reason": "scripted"}

    with Stub(chat=chat) as stub:
        judge = {"type": "llm", "model": "m", "base_url": stub.base_url, "api_key_env": "RAGMEM_TEST_KEY",
                 "cache_dir": str(tmp_path / "cache"), "retry_backoff_s": 0.01}
        result = ragmem.evaluate(_traffic(tmp_path, references=5), track=False, judge=judge, metrics=["pass_rate"],
                                 preflight=False)
    # 12 with contexts and no reference... of which none has a reference (the 5 are the last, without contexts)
    assert asked.count("supported") == WITH_CONTEXTS and asked.count("reference") == 5
    summary = result.summary
    assert result.metrics["n_judged"] == WITH_CONTEXTS + 5
    assert summary["partial"].get("pass_rate") is None or "3: no reference answer" in summary["partial"]["pass_rate"]
    assert summary["coverage"]["pass_rate"] == {"scored": WITH_CONTEXTS + 5, "of": N}
    assert ("pass_rate: 3 examples have neither a reference answer nor contexts: not judged") in summary["notes"]
    assert (f"pass_rate: {WITH_CONTEXTS} verdicts are reference-free (no reference answer): the answer correct and "
            f"supported by its contexts (judge task answer_supported)") in summary["notes"]


def test_context_relevance_needs_no_reference_and_is_the_share_of_relevant_chunks(tmp_path, monkeypatch):
    from tests.openai_stub import Stub, data_block, user_text

    monkeypatch.setenv("RAGMEM_TEST_KEY", "k")
    offline = ragmem.evaluate(_traffic(tmp_path), track=False)
    # offline: the first chunk holds the query's keywords, "Other." none of them: 1 of 2 on each of the 12
    assert offline.summary["coverage"]["context_relevance"] == {"scored": WITH_CONTEXTS, "of": N}
    assert offline.metrics["context_relevance"] == pytest.approx(0.5)
    asked = []

    def chat(request):
        if "helps answer the question" in user_text(request):
            asked.append(data_block(request, "context"))
            return {"verdict": "no" if data_block(request, "context") == "Other." else "yes", "reason": "scripted"}
        return {"verdict": "yes", "reason": "scripted"}

    with Stub(chat=chat) as stub:
        judge = {"type": "llm", "model": "m", "base_url": stub.base_url, "api_key_env": "RAGMEM_TEST_KEY",
                 "cache_dir": str(tmp_path / "cache"), "retry_backoff_s": 0.01}
        result = ragmem.evaluate(_traffic(tmp_path), track=False, judge=judge, metrics=["context_relevance"],
                                 preflight=False)
    assert len(asked) == 2 * WITH_CONTEXTS  # one verdict per chunk, none for the 8 without contexts
    assert result.metrics["context_relevance"] == pytest.approx(0.5)
    values = result.table["context_relevance"].tolist()
    assert values[:WITH_CONTEXTS] == [0.5] * WITH_CONTEXTS and all(math.isnan(v) for v in values[WITH_CONTEXTS:])
