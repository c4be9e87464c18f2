"""report.html (logged with every run) and ``ragmem report``: a self-contained page. Rendered in a real
headless browser: tests/e2e/test_report_browser.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mlflow import MlflowClient

import ragmem
from ragmem.report import html as report_html, pages as report_pages
from tests.conftest import ROOT

DEMO = ROOT / "ragmem" / "datasets" / "demo_bilingual.json"


def test_keywords_are_highlighted_and_everything_else_escaped():
    assert report_html.keywords("rag 检索 模型") == ["rag", "检索", "模型"]
    assert report_html.keywords('["a b", "c"]') == ["a b", "c"]
    marked = report_html.highlight("RAG <b>检索</b> & 检索模型", ["rag", "检索", "检索模型"], "hit")
    assert marked == ('<mark class="hit">RAG</mark> &lt;b&gt;<mark class="hit">检索</mark>&lt;/b&gt; &amp; '
                      '<mark class="hit">检索模型</mark>')


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, shared_store):
    """The demo data, and a copy whose first six passing answers were replaced by wrong ones."""
    folder = tmp_path_factory.mktemp("report")
    records = json.loads(DEMO.read_text(encoding="utf-8"))
    base = ragmem.evaluate(str(DEMO), experiment="report-html", tracking=shared_store)
    passing = [i for i, r in enumerate(records) if base.table.loc[i, "verdict"] == 1][:6]
    for i in passing:
        records[i]["generated_answer"] = "I do not know."
    worse_path = folder / "worse.json"
    worse_path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    worse = ragmem.evaluate(str(worse_path), experiment="report-html", tracking=shared_store)
    return base, worse, [records[i]["id"] for i in passing], folder


def test_every_run_logs_a_self_contained_report(two_runs, shared_store):
    base, _, _, folder = two_runs
    client = MlflowClient(shared_store["uri"])
    page = Path(client.download_artifacts(base.run_id, "report.html", str(folder))).read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing fetched at view time
    assert "<script" not in page  # works in MLflow's sandboxed artifact viewer
    headline = page.index("<h2>Headline metrics</h2>")
    assert page.index(">pass_rate (keyword)<", headline) < page.index(">reference_coverage<", headline)
    assert "0.5833" in page and "[0.4186, 0.7420]" in page  # pass rate and its interval
    # the demo's 15 failed verdicts first, then 10 passed ones, labelled as such
    assert "Worst examples (25 of 36; 10 of them passed, shown for their low reference coverage)" in page
    assert "Failures (0)" in page and "<h2>Latency</h2>" in page
    assert "<summary>signatures of the settings</summary>" in page and "judge:keyword|thr:0.7" in page
    assert page == report_pages.from_tracking(client, [base.run_id[:8]])  # ragmem report RUN rebuilds it


def test_a_diff_shows_the_flipped_verdicts(two_runs, shared_store):
    base, worse, flipped, _ = two_runs
    page = report_pages.from_tracking(MlflowClient(shared_store["uri"]), [base.run_id, worse.run_id[:10]], resamples=200)
    assert "Flipped to fail (pass in A, fail in B): 6" in page and "Flipped to pass (fail in A, pass in B): 0" in page
    section = page[page.index("Flipped to fail"):page.index("Flipped to pass")]
    assert re.findall(r"<tr><td>([^<]+)</td>", section) == flipped
    assert "I do not know." in section and ">pass_rate<" in page
    # the scores that moved are marked (the answer became "I do not know.": token_f1 fell), the others dimmed
    assert re.search(r'<b class="down">token_f1 [0-9.]+ &rarr; 0.000</b>', section)
    assert re.search(r'<span class="note">[a-z_@0-9]+ [0-9.]+ &rarr; [0-9.]+</span>', section)


def test_a_failed_call_without_an_answer_is_shown_with_its_reason():
    import pandas as pd

    table = pd.DataFrame([{"id": "x1", "query": "q?", "generated_answer": float("nan"), "reference_answer": "ref",
                           "error": "TimeoutError: agent call exceeded 2 s", "judge_error": None, "verdict": float("nan"),
                           "judge_reason": float("nan"), "kw_reference": "ref", "kw_generated": float("nan"),
                           "contexts": [], "latency_s": float("nan")}])
    summary = {"experiment": "e", "run_id": None, "n_examples": 1, "n_errors": 1, "metrics": {"pass_rate": None},
               "ci": {}, "params": {}}
    page = report_html.run_page(summary, table)
    assert "Failures (1)" in page and "TimeoutError: agent call exceeded 2 s" in page and ">nan<" not in page
    assert "no answer" in page and "not judged" in page and "latency not measured" in page


def test_the_judge_reliability_section_puts_the_disputed_examples_first():
    """The unreliable line, the figures, then the examples where the judge disagrees with the label
    (first), then those whose samples disagree with each other (least agreement first)."""
    import pandas as pd

    rows = [("agree", 1, 1, 1.0), ("self-split", 1, 1, 0.6), ("against-label", 0, 1, 1.0), ("self-split-more", 0, 0, 0.4)]
    table = pd.DataFrame([{"id": i, "query": "q", "generated_answer": "a", "reference_answer": "r", "label": label,
                           "verdict": verdict, "judge_agreement": share, "judge_reason": f"why {i}", "error": None,
                           "judge_error": None, "kw_reference": "r", "kw_generated": "a", "contexts": [], "latency_s": None}
                          for i, label, verdict, share in rows])
    summary = {"experiment": "e", "run_id": None, "n_examples": 4, "n_errors": 0, "params": {},
               "metrics": {"pass_rate": 0.75, "judge_label_kappa": 0.0, "n_labelled": 4, "judge_flip_rate": 0.5},
               "ci": {"judge_label_kappa": [-0.5, 0.2]}, "judge_unreliable": "judge unreliable: Cohen kappa ..."}
    page = report_html.run_page(summary, table)
    section = page[page.index("<h2>Judge reliability</h2>"):]
    assert 'class="fail">judge unreliable: Cohen kappa ...' in section and "judge_flip_rate" in section
    assert "3 examples where the judge disagrees with the label or with itself" in section
    order = [section.index(f">{i}<") for i in ("against-label", "self-split-more", "self-split")]
    assert order == sorted(order) and ">agree<" not in section[:section.index("<h2>", 10)]


def test_keyword_based_values_are_marked_as_such():
    """The offline judge's figures are word overlap: marked ``(keyword)`` in the report (and the
    terminal, by the same catalogue predicate); an LLM judge's, and the figures no judge scores, are not."""
    from ragmem.metrics import catalogue
    from ragmem.report import html as report_html

    assert catalogue.keyword_based("faithfulness", asks_llm=False) and catalogue.keyword_based("pass_rate", False)
    assert not catalogue.keyword_based("faithfulness", asks_llm=True)
    assert not catalogue.keyword_based("ndcg_at_10", asks_llm=False) and not catalogue.keyword_based("bleu", False)
    summary = {"metrics": {"pass_rate": 0.5, "ndcg_at_10": 0.7}, "params": {"judge.type": "keyword"}}
    offline = report_html._metrics_table(summary, ["pass_rate", "ndcg_at_10"])
    assert ">pass_rate (keyword)<" in offline and ">ndcg_at_10<" in offline and "word overlap" in offline
    judged = report_html._metrics_table({**summary, "params": {"judge.type": "llm"}}, ["pass_rate"])
    assert ">pass_rate<" in judged and "(keyword)" not in judged
