"""Reports and comparisons of runs whose records have no reference answers (production traffic): the
report's worst example is the one least faithful to its contexts, the diff page lists the scores that
moved, ``compare``'s table of runs sorts by a metric the runs have, and ``compare``'s terminal and
``--output`` give the same Holm p-values as the diff page (one family of metrics)."""

from __future__ import annotations

import re

from mlflow import MlflowClient

import ragmem
from ragmem.report import html, pages
from ragmem.tracking import compare


def _records(wrong: int) -> list[dict]:
    out = []
    for i in range(24):
        context = f"The warehouse in city {i} opens at {6 + i % 5} in the morning and ships parcels daily."
        answer = ("Our moon base sells purple bicycles to penguins." if i == wrong else
                  f"The warehouse in city {i} opens at {6 + i % 5} in the morning.")
        out.append({"id": f"q{i}", "query": f"When does the warehouse in city {i} open?", "generated_answer": answer,
                    "contexts": [{"id": f"d{i}", "text": context}]})
    return out


def test_pages_and_comparisons_without_references(tmp_path, shared_store, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    tracking = {**shared_store, "max_traces": 0}
    settings = {"experiment": "no-references", "tracking": tracking, "stats": {"resamples": 200}}
    a = ragmem.evaluate(_records(wrong=9), **settings)
    b = ragmem.evaluate(_records(wrong=3), **settings)
    assert a.metrics.get("pass_rate") is None and a.metrics["faithfulness"] is not None

    worst = html.worst(a.table)
    assert html.worst_by(a.table) == "faithfulness" and worst.iloc[0]["id"] == "q9"  # (it was 10th, by position)
    assert "then the lowest faithfulness" in html.run_page(a.summary, a.table)

    client = MlflowClient(shared_store["uri"])
    diff = pages.from_tracking(client, [a.run_id, b.run_id])
    assert re.search(r"<h2>Moved most in faithfulness: 2</h2>", diff), diff[:3000]

    table, _, _ = compare.list_runs(client, "no-references")
    assert table.attrs["sorted_by"] != "pass_rate" and table[table.attrs["sorted_by"]].notna().all()

    paired = compare.paired_comparison(client, a.run_id, b.run_id)
    rows = {r["metric"]: r for r in paired["metrics"]}
    cells = dict(re.findall(r"<tr><td>([a-z_0-9]+)</td>(?:<td[^>]*>[^<]*</td>|<td[^>]*><span[^>]*>[^<]*</span></td>){5}"
                            r"<td[^>]*>([0-9.]+)", diff))
    assert cells and all(f"{rows[m]['p_holm']:.4f}" == p for m, p in cells.items()), (cells, rows)
