"""A metric that is 0/0 on every example is null with the default settings, never 0: in the Python
API, the summary JSON, the per-example table, the terminal and MLflow (absent there); 0 only when a
user sets ``zero_division: 0``."""

from __future__ import annotations

import json

from mlflow import MlflowClient

import ragmem
from ragmem.report import terminal


def _data(tmp_path):
    """Answers without a single keyword ("的", a stopword): the share of an answer's keywords that
    the contexts hold (avg_coverage) is 0/0 on every example."""
    rows = [{"id": f"q{i}", "query": f"question {i}", "reference_answer": f"memory note {i}",
             "generated_answer": "的", "contexts": [f"memory note {i}"], "label": 1} for i in range(6)]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_a_metric_undefined_on_every_example_is_null_everywhere(tmp_path, shared_store, capsys):
    tracking = {"uri": shared_store["uri"], "artifact_root": shared_store["artifact_root"]}
    result = ragmem.evaluate(_data(tmp_path), tracking=tracking, experiment="undefined-is-null")
    assert result.params["zero_division"] == "nan"
    assert result.metrics["avg_coverage"] is None and result.summary["counts"]["undefined_avg_coverage"] == 6
    assert result.summary["metrics"]["avg_coverage"] is None and result.summary["ci"].get("avg_coverage") is None
    assert result.table["coverage"].isna().all()  # null per example too
    assert result.metrics["reference_coverage"] == 1.0  # the other coverage is defined and unchanged
    logged = MlflowClient(shared_store["uri"]).get_run(result.run_id).data.metrics
    assert "avg_coverage" not in logged and logged["count/undefined_avg_coverage"] == 6
    terminal.print_summary(result.summary, show_all=True, stored=False)
    shown = capsys.readouterr().out
    assert "avg_coverage" in shown and not [line for line in shown.splitlines()
                                            if "avg_coverage" in line and "0.0000" in line]
    # 0 is a choice a user makes, and then it is 0 (and still counted)
    chosen = ragmem.evaluate(_data(tmp_path), track=False, zero_division=0)
    assert chosen.metrics["avg_coverage"] == 0.0 and chosen.summary["counts"]["undefined_avg_coverage"] == 6
