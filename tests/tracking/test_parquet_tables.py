"""The per-example table as ``examples.parquet`` (CSV and JSON copies only up to
``tracking.table_copies_max_rows`` rows), and runs logged before it (JSON and CSV only) read back
alike by compare, report A B, gates with a baseline, labels import and a sweep's resume."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

import ragmem
from ragmem.report import pages as report_pages
from ragmem.run import gates, prepare, resume
from ragmem.stats.paired_runs import frame_of
from ragmem.tracking import files
from ragmem.tracking.compare import paired_comparison
from ragmem.tracking.runs import load_run_table


def _answers(folder: Path, name: str, wrong: set[int], n: int = 60) -> str:
    path = folder / name
    path.write_text(json.dumps([{"id": f"e{i}", "query": f"Which city hosts site {i}?",
                                 "reference_answer": f"Site {i} is in Lisbon harbour.", "latency_ms": 10 + i,
                                 "retrieved_contexts": [{"id": f"c{i}", "text": f"Site {i} is in Lisbon harbour."}],
                                 "generated_answer": (f"Site {i} is in Oslo fjord." if i in wrong
                                                      else f"Site {i} is in Lisbon harbour.")} for i in range(n)]))
    return str(path)


def _artifacts(client, run_id) -> set[str]:
    return {a.path for a in client.list_artifacts(run_id)}


def _as_logged_before_parquet(store: dict, client, run_id: str) -> None:
    """Make a run look as runs logged before the Parquet file do: its examples.parquet removed."""
    artifact_dir = Path(client.get_run(run_id).info.artifact_uri.removeprefix("file://"))
    (artifact_dir / "examples.parquet").unlink()
    assert "examples.parquet" not in _artifacts(client, run_id)


def test_which_files_a_table_is_logged_as():
    assert files.table_kinds(50_000) == ("parquet", "csv", "json")
    assert files.table_kinds(50_001) == ("parquet",)
    assert files.table_kinds(11, copies_max_rows=10) == ("parquet",)


def test_parquet_keeps_every_value_exactly_and_reads_back_as_the_json_does(tmp_path):
    table = pd.DataFrame({"id": ["a", "b", "c"], "score": [1 / 3, None, 0.1 + 0.2],
                          "label": pd.array([1, None, 0], dtype="Int64"), "error": [None, "timeout", None],
                          "contexts": [[{"id": "c1", "text": "一"}], [], [{"id": "c2", "text": "x", "score": 0.5}]],
                          "free": ["text", 3, True]})  # a free-form column of mixed types
    parquet = files.read_parquet(files.table_file(table, tmp_path, "t", "parquet"))
    payload = json.loads(Path(files.table_file(table, tmp_path, "t", "json")).read_text(encoding="utf-8"))
    from_json = pd.DataFrame(payload["data"], columns=payload["columns"])
    assert list(parquet.columns) == list(from_json.columns)
    assert parquet["score"].tolist()[0] == 1 / 3 and np.isnan(parquet["score"][1])  # exact, NaN as in the JSON
    assert parquet["score"].tolist()[2] == 0.1 + 0.2
    for column in ("id", "label", "error", "contexts"):
        pd.testing.assert_series_equal(parquet[column], from_json[column])
    assert json.loads(parquet["contexts"][0]) == [{"id": "c1", "text": "一"}]
    assert parquet["free"].tolist() == ["text", "3", "true"]  # one type per Parquet column: JSON text
    assert table["contexts"][0] == [{"id": "c1", "text": "一"}] and table["free"][1] == 3  # the table itself as it was


@pytest.mark.parametrize("rows", [0, 1, 5, 7, 8])
def test_the_json_table_written_in_parts_is_pandas_whole_text_byte_for_byte(tmp_path, monkeypatch, rows):
    """MLflow's table JSON is written JSON_ROWS rows at a time (pandas makes the whole text in memory:
    70 MB more at 10k examples): the file is the one ``to_json`` of the whole table writes, whatever
    the number of rows against the part's size (here 3), and whatever the values."""
    monkeypatch.setattr(files, "JSON_ROWS", 3)
    table = pd.DataFrame({"id": [f"e{i}" for i in range(8)],
                          "score": [1 / 3, np.nan, np.inf, 1e-300, 0.1 + 0.2, -0.0, 2.5, None],
                          "answer": ["中文 \"quoted\"", None, "", "\n", "a/b", "x", "y", "z"],
                          "passed": [True, False, None, True, False, True, None, False],
                          "contexts": [[{"id": "c1", "text": "一"}], [], None, [{"text": "t", "score": 0.5}], [], [], [], []]
                          }).iloc[:rows]
    flat = files._flat(table)
    written = files._write(flat, tmp_path, "t", "json")
    whole = tmp_path / "whole.json"
    flat.to_json(whole, orient="split", index=False, double_precision=15, force_ascii=False)
    assert Path(written).read_bytes() == whole.read_bytes()
    assert len(json.loads(whole.read_text(encoding="utf-8"))["data"]) == rows


def test_runs_in_the_new_format_and_before_it_are_compared_gated_and_reported(tmp_path, shared_store):
    tracking = {"uri": shared_store["uri"], "artifact_root": shared_store["artifact_root"]}
    client = MlflowClient(shared_store["uri"])
    old = ragmem.evaluate(_answers(tmp_path, "old.json", {0, 20, 40}), tracking=tracking, experiment="parquet-tables")
    assert {"examples.parquet", "examples.csv", "examples.json"} <= _artifacts(client, old.run_id)
    _as_logged_before_parquet(shared_store, client, old.run_id)
    new = ragmem.evaluate(_answers(tmp_path, "new.json", set(range(0, 60, 3))),
                          tracking=dict(tracking, table_copies_max_rows=10), experiment="parquet-tables")
    logged = _artifacts(client, new.run_id)
    assert "examples.parquet" in logged and not {"examples.csv", "examples.json"} & logged  # 60 rows > 10

    old_table, new_table = load_run_table(client, old.run_id), load_run_table(client, new.run_id)
    assert old_table["id"].tolist() == new_table["id"].tolist() == [f"e{i}" for i in range(60)]
    assert new_table["latency_s"].tolist() == new.table["latency_s"].tolist()  # exact, from the Parquet
    assert old_table["overlap"].tolist() == pytest.approx(old.table["overlap"].tolist(), abs=1e-14)

    result = paired_comparison(client, old.run_id, new.run_id, ["pass_rate", "latency_p50"], resamples=300)
    rows = {r["metric"]: r for r in result["metrics"]}
    assert result["n_shared"] == 60
    assert rows["pass_rate"]["diff"] == pytest.approx((57 - 40) / 60 * -1)
    assert rows["pass_rate"]["ci_high"] < 0 and rows["latency_p50"]["diff"] == 0

    page = report_pages.from_tracking(client, [old.run_id, new.run_id], resamples=300)
    assert "pass_rate" in page and old.run_id[:8] in page and new.run_id[:8] in page

    base = prepare.resolve(extra={"tracking": tracking, "baseline": old.run_id,  # the baseline in the old format
                                  "gates": {"pass_rate": {"max_regression": 0.05}},
                                  "data": {"files": [{"path": str(tmp_path / "new.json")}]}})
    ready = prepare.for_run(base)
    [gate] = gates.regressions(ready.config, new.table, new.params, new.metrics, ready.baseline)
    assert not gate.passed and gate.ci_high < -0.05

    child = resume.finished_child(ragmem.tracking.Tracker(shared_store["uri"]), new.run_id)  # a sweep's resume
    pd.testing.assert_frame_equal(frame_of(child["table"]), new_table)  # read in chunks when compared


def test_a_run_started_before_a_setting_existed_resumes_with_that_setting_at_its_default():
    from ragmem.run.resume import settings_that_differ

    started = {"seed": 0, "stats.resamples": 1000}  # a journal written before stats.bootstrap existed
    assert settings_that_differ(started, {**started, "stats.bootstrap": "poisson",
                                          "tracking.table_copies_max_rows": 10}) == []  # default; resume-free
    assert settings_that_differ(started, {**started, "stats.bootstrap": "classic"}) == ["stats.bootstrap"]
