"""Every score says how much of the data it rests on: 16 examples whose judge fails 11 faithfulness
replies give faithfulness "5 of 16" (coverage in the summary JSON, n_scored/ in MLflow, partial in
the terminal with the reason, the failed replies in the header), the same held or streamed in chunks."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

import ragmem
from ragmem.metrics import scored
from ragmem.metrics.scored import chunk_coverage, merged
from ragmem.report import html as report_html, terminal
from tests.openai_stub import Stub, data_block, user_text

N, FAILED = 16, 11


def _chat(request):
    """Claims for the answers of examples 11 to 15; for examples 0 to 10, a reply that is no JSON (and
    after the repair, still not the claims asked for)."""
    text = user_text(request)
    if "Break the answer into" in text:
        number = int(data_block(request, "answer").split()[-1].rstrip("."))
        return "no json here" if number < FAILED else {"claims": [f"Qdrant {number}"]}
    return {"verdict": "yes", "reason": "scripted"}


def _data(tmp_path):
    rows = [{"id": f"e{i}", "query": f"Question {i}?", "reference_answer": f"Qdrant {i}.",
             "generated_answer": f"Qdrant {i}.", "context": [f"Qdrant {i}"]} for i in range(N)]
    path = tmp_path / "d.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return str(path)


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("RAGMEM_TEST_KEY", "k")


def _judge(stub, tmp_path):
    return {"type": "llm", "model": "m", "base_url": stub.base_url, "api_key_env": "RAGMEM_TEST_KEY",
            "cache_dir": str(tmp_path / "cache"), "retry_backoff_s": 0.01, "timeout_s": 5}


def test_a_score_from_5_of_16_examples_is_shown_as_partial_everywhere(tmp_path, shared_store, capsys):
    tracking = {"uri": shared_store["uri"], "artifact_root": shared_store["artifact_root"]}
    with Stub(chat=_chat) as stub:
        held = ragmem.evaluate(_data(tmp_path), tracking=tracking, experiment="partial", judge=_judge(stub, tmp_path),
                               metrics=["faithfulness", "answer_correctness"])
        streamed = ragmem.evaluate(None, {"data": {"files": [{"path": _data(tmp_path)}], "chunk_size": 4},
                                          "judge": _judge(stub, tmp_path), "metrics": ["faithfulness", "answer_correctness"]},
                                   track=False)
    summary = held.summary
    assert summary["coverage"]["faithfulness"] == {"scored": 5, "of": 16}
    assert summary["coverage"]["answer_correctness"] == {"scored": 16, "of": 16}
    assert list(summary["partial"]) == ["faithfulness", "faithfulness_pass_rate"]  # its pass rate rests on the same
    assert summary["partial"]["faithfulness"].startswith("5 of 16 (11: ")
    reason = summary["partial"]["faithfulness"][len("5 of 16 (11: "):-1]
    assert reason and reason == scored.cause(held.table["faithfulness_error"].dropna().iloc[0])
    # a streamed run's coverage is its chunks' added up: the same
    assert streamed.summary["coverage"] == summary["coverage"] and streamed.summary["partial"] == summary["partial"]
    logged = MlflowClient(shared_store["uri"]).get_run(held.run_id).data.metrics
    assert logged["n_scored/faithfulness"] == 5 and logged["n_scored/answer_correctness"] == 16
    terminal.print_summary(summary, stored=False)
    shown = " ".join(capsys.readouterr().out.split())
    assert "16 examples, 0 errors, 11 failed metric replies" in shown and "faithfulness (partial)" in shown
    assert (f"partial (scored on less than 0.9 of the examples): faithfulness, faithfulness_pass_rate 5 of 16 "
            f"(11: {reason[:20]}") in shown  # (the metrics with the same count and reason, together)
    # report.html: the row says 5 of 16, partial; the failures section lists the 11 with their reason
    page = report_html.run_page(summary, held.table)
    assert "5 of 16, partial</span>" in page and "<h2>Failures (0; 11 failed metric replies)</h2>" in page
    section = page[page.index("<h3>faithfulness: 11 failed replies</h3>"):]
    section = section[:section.index("</table>")]
    assert section.count('<span class="err">') == 11 and "none: every agent call" not in page


def test_chunks_add_up_and_classification_rests_on_the_labelled_examples():
    import pandas as pd

    table = pd.DataFrame({"id": ["a", "b", "c", "d"], "label": [1, None, 0, 1], "verdict": [1, 1, None, 0],
                          "error": [None, None, "boom", None], "judge_error": [None, None, None, None],
                          "coverage": [0.5, None, None, 1.0]})
    whole = chunk_coverage(table, ["f1", "pass_rate", "avg_coverage", "n_labelled"])
    assert whole["f1"] == {"scored": 2, "of": 3, "reasons": {"agent call failed": 1}}
    assert whole["pass_rate"] == {"scored": 3, "of": 4, "reasons": {"agent call failed": 1}}
    assert whole["avg_coverage"]["reasons"] == {"undefined (0/0 or an input missing)": 1, "agent call failed": 1}
    assert "n_labelled" not in whole  # a count rests on nothing
    parts = merged(chunk_coverage(table.iloc[:2], ["f1", "avg_coverage"]), chunk_coverage(table.iloc[2:], ["f1", "avg_coverage"]))
    assert parts == {k: whole[k] for k in ("f1", "avg_coverage")}


def test_failures_are_grouped_by_cause_and_add_up_with_the_setting_whole():
    """Ten replies cut off at different lengths and a claim number each are one cause, its setting's
    value whole (1024, never cut to 102); the causes add up to the examples missing; a metric that failed
    on every example says why where it is listed as not computed."""
    ids = [f"q{i}" for i in range(16)]
    table = pd.DataFrame({"id": ids, "error": [None] * 14 + ["timed out"] * 2,
                          "faithfulness": [1.0] * 4 + [np.nan] * 12,
                          "faithfulness_error": [None] * 4 + [f"claim {i}: reply cut off at {80 + i} tokens "
                                                               f"(judge.max_tokens 1024)" for i in range(10)] + [None] * 2})
    coverage = chunk_coverage(table, ["faithfulness"])
    assert coverage["faithfulness"]["reasons"] == {
        "claim …: reply cut off at … tokens (judge.max_tokens 1024)": 10, "agent call failed": 2}
    assert scored.partial(coverage, 0.9) == {"faithfulness": "4 of 16 (10: claim …: reply cut off at … tokens "
                                                             "(judge.max_tokens 1024); 2: agent call failed)"}
    long = scored.cause("word " * 20 + "(judge.max_tokens 1024) " + "word " * 30)
    assert len(long) <= scored.CAUSE_CHARS + 2 and long.endswith(" …") and "(judge.max_tokens 1024)" in long


def test_a_metric_failed_everywhere_says_why_in_the_terminal(capsys):
    summary = {"experiment": "e", "n_examples": 16, "n_errors": 0, "metrics": {"pass_rate": 0.5, "faithfulness": None},
               "coverage": {"faithfulness": {"scored": 0, "of": 16, "reasons": {"reply cut off at … tokens "
                                                                                "(judge.max_tokens 1024)": 16}}}}
    terminal.print_summary(summary, stored=False)
    shown = " ".join(capsys.readouterr().out.split())
    assert ("not computed (null): faithfulness (0 of 16: 16: reply cut off at … tokens (judge.max_tokens 1024))"
            in shown), shown
