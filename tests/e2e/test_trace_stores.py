"""The trace store is checked before any judge request and its failures are contained (issue 60,
point 3): a store that is missing (never created by reading), not SQLite, SQLite but not MLflow's,
or damaged is refused in one line naming the setting; a read-only store runs with its assessments
not written, and says so; a trace deleted after it was read is left out of the write-back and
counted; a watermark that is not a time is one line naming the tag and the run."""

from __future__ import annotations

import contextlib
import json
import sqlite3

import pytest
from mlflow import MlflowClient

import ragmem
from ragmem.errors import ConfigError, RagmemError
from ragmem.run import traffic as run_traffic, windows
from ragmem.runtime import progress
from ragmem.tracking import traces
from ragmem.tracking.store import Feedback
from ragmem.tracking.uri import accepts_writes
from tests import traffic

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def _config(tmp_path, app: str, **traces_settings) -> dict:
    return {"experiment": "stores-eval", "metrics": ["pass_rate"], "stats": {"resamples": 50},
            "data": {"traces": {"experiment": "app", "tracking_uri": app, "since": "7d", **traces_settings}},
            "tracking": {"uri": f"sqlite:///{tmp_path / 'eval.db'}", "max_traces": 0}}


def _refused(tmp_path, app: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as caught:
        ragmem.evaluate(config=_config(tmp_path, app))
    assert "\n" not in str(caught.value)


def test_a_missing_store_is_refused_and_never_created(tmp_path):
    path = tmp_path / "nowhere" / "app.db"
    _refused(tmp_path, f"sqlite:///{path}", r"^data.traces.tracking_uri sqlite:///.*: no store at .*app.db "
                                            r"\(reading traces never creates one: check the path\)$")
    assert not path.exists() and not path.parent.exists()


def test_a_file_that_is_not_a_store_is_refused(tmp_path):
    text = tmp_path / "notes.db"
    text.write_text("these are my notes, not a database\n")
    _refused(tmp_path, f"sqlite:///{text}", r"notes.db is not an SQLite database$")
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    _refused(tmp_path, f"sqlite:///{empty}", r"empty.db is not an SQLite database \(an empty file\)$")
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE recipes (name TEXT)")
    _refused(tmp_path, f"sqlite:///{other}", r"other.db is an SQLite database but not an MLflow store with traces")


def test_a_damaged_store_is_refused_before_any_judging(tmp_path):
    path = tmp_path / "app.db"
    traffic.write_mlflow(f"sqlite:///{path}", "app", traffic.plan(6, raised=0))
    data = bytearray(path.read_bytes())
    data[100:len(data)] = bytes(range(256)) * ((len(data) - 100) // 256) + bytes((len(data) - 100) % 256)
    path.write_bytes(bytes(data))  # the header kept, every page after it garbage
    _refused(tmp_path, f"sqlite:///{path}", r"app.db cannot be read as a store \(.*\)$|could not be read")


def test_a_read_only_store_is_judged_with_its_assessments_not_written_and_said(tmp_path, monkeypatch):
    app = f"sqlite:///{tmp_path / 'app.db'}"
    ids = traffic.write_mlflow(app, "app", traffic.plan(6, raised=0))
    assert accepts_writes(app)  # (a store this process may write: the probe takes a write lock and lets go)
    monkeypatch.setattr(run_traffic, "accepts_writes", lambda store: False)  # (as a read-only mount: root writes anyway)
    result = ragmem.evaluate(config=_config(tmp_path, app))
    assert result.summary["n_examples"] == 6
    assert any(f"assessments not written: the store {app} is read-only" in n for n in result.summary["notes"])
    assert result.params["data.traces.write_back"] == "false"
    client = traces._client(app)
    assert all(not client.get_trace(i).info.assessments for i in ids)


def test_a_trace_deleted_after_it_was_read_is_left_out_of_the_write_back(tmp_path, monkeypatch):
    """... and the write-back counts its traces in a progress stage of its own (minutes for a nightly
    window): the stage itself is read, not its log line, which only a stage longer than the interval
    writes (a timing this test must not depend on)."""
    opened = []
    real = progress.stage

    @contextlib.contextmanager
    def stage(name, total=None, unit=""):
        with real(name, total, unit) as made:
            opened.append(made)
            yield made

    monkeypatch.setattr(progress, "stage", stage)
    app = f"sqlite:///{tmp_path / 'app.db'}"
    ids = traffic.write_mlflow(app, "app", traffic.plan(40, raised=0))
    client = MlflowClient(app)
    client.delete_traces(client.get_experiment_by_name("app").experiment_id, trace_ids=[ids[0]])
    feedback = {i: [Feedback("faithfulness", 1.0, "supported", "CODE", "ragmem")] for i in ids}
    feedback[ids[1]] = []  # (nothing to write: not counted)
    counts = traces.write_back(app, feedback, "run-1", {traces.SIGNATURE_KEY: "judge:keyword"})
    assert counts == {"added": 38, "updated": 0, "gone": 1}
    assert [(s.name, s.total, s.done, s.unit) for s in opened] == [("writing assessments back", 39, 39, "traces")]
    assert opened[0].line(closing=True).startswith("writing assessments back: 39/39 traces in ")


def test_a_watermark_that_is_not_a_time_is_one_line_naming_the_tag_and_the_run(tmp_path):
    app = f"sqlite:///{tmp_path / 'app.db'}"
    traffic.write_mlflow(app, "app", traffic.plan(3, raised=0))
    config = _config(tmp_path, app, incremental=True)
    first = ragmem.evaluate(config=config)
    MlflowClient(config["tracking"]["uri"]).set_tag(first.run_id, windows.UNTIL, "yesterday-ish")
    with pytest.raises(RagmemError, match=rf"^data.traces.incremental: the tag ragmem.traces.until of run "
                                          rf"{first.run_id} is not a time: 'yesterday-ish' \(the watermark"):
        ragmem.evaluate(config=config)
    assert windows._HELD == {}  # (the refused window gave its claim back)


def _odd_trace(app: str, name: str, start_ns: int, end_ns: int, attributes: dict | None = None) -> str:
    """A trace written through MLflow's client with the times and attributes given."""
    client = MlflowClient(app)
    with traffic.writing_to(app):
        experiment = client.get_experiment_by_name("app").experiment_id
        root = client.start_trace(name, span_type="AGENT", inputs={"query": f"{name}?"}, experiment_id=experiment,
                                  start_time_ns=start_ns, attributes=attributes)
        client.end_trace(root.trace_id, outputs={"answer": f"{name}."}, end_time_ns=end_ns)
    return root.trace_id


def test_a_window_with_odd_traces_judges_the_rest_and_names_each(tmp_path, monkeypatch):
    """Issue 60's window of 50 traces: one whose root ends before it starts, one whose token usage is
    text, one whose root span is not in the store (deleted from its spans table: its other spans
    read) and one deleted after it was listed: 46 judged, 4 named failures, and the run ends well."""
    import time

    app = f"sqlite:///{tmp_path / 'app.db'}"
    ids = traffic.write_mlflow(app, "app", traffic.plan(48, raised=0))
    now = time.time_ns() - 600 * 10**9
    backwards = _odd_trace(app, "backwards", now, now - 5 * 10**9)
    wordy = _odd_trace(app, "wordy", now + 10**9, now + 2 * 10**9,
                       {"mlflow.chat.tokenUsage": json.dumps({"input_tokens": "ten", "output_tokens": 3})})
    gone, rootless = ids[5], ids[7]
    with sqlite3.connect(tmp_path / "app.db") as db:
        assert db.execute("DELETE FROM spans WHERE trace_id = ? AND parent_span_id IS NULL", (rootless,)).rowcount == 1
    listed = traces._with_spans
    monkeypatch.setattr(traces, "_with_spans", lambda uri, infos: {  # (deleted between listing and reading)
        k: v for k, v in listed(uri, infos).items() if k != gone})
    result = ragmem.evaluate(config=_config(tmp_path, app))
    summary = result.summary
    assert summary["n_examples"] == 50 and summary["counts"]["n_agent_errors"] == 4  # (46 judged)
    named = next(n for n in summary["notes"] if n.startswith("4 traces failed"))
    assert f"{backwards}: its root span lasts -5000 ms" in named
    assert f"{wordy}: its token usage input_tokens = 'ten' is not a count" in named
    assert f"{gone}: its spans could not be read from the store (deleted since it was listed" in named
    assert f"{rootless}: its spans could not be read from the store (deleted since it was listed, its root span " \
           "missing, or not written)" in named


def test_a_window_read_in_chunks_is_summarized_with_its_volume_and_drift(tmp_path):
    """A window larger than data.chunk_size (a streamed run: its table a Parquet file) gets its volume
    and its drift like any window (it was an internal error: the drift read the table as a frame)."""
    import time

    app = f"sqlite:///{tmp_path / 'app.db'}"
    traffic.write_mlflow(app, "app", traffic.plan(30, raised=0))
    config = _config(tmp_path, app, incremental=True, lag="0s")
    config.update(data={**config["data"], "chunk_size": 10}, gates={"faithfulness": {"drift": {"max_drop": 0.1}}})
    first = ragmem.evaluate(config=config)
    assert first.summary["traces"]["volume"]["units"] == 2  # (two sessions)
    traffic.write_mlflow(app, "app", traffic.plan(12, raised=0, first=30, start_ns=time.time_ns(), step_ns=10**6))
    second = ragmem.evaluate(config=config)
    drift = second.summary["traces"]["drift"]["faithfulness"]
    assert second.summary["n_examples"] == 12 and drift["windows"] == 2 and drift["alarmed"] is False


def test_traces_written_after_their_window_was_read_are_counted_in_the_next_windows_note(tmp_path):
    """Issue 60, point 3: a trace that started inside a finished window but reached the store after
    that window was read (still running then, an exporter's delay) is judged by no window: the next
    window says how many, in its log and its summary's notes."""
    import time

    app = f"sqlite:///{tmp_path / 'app.db'}"
    traffic.write_mlflow(app, "app", traffic.plan(6, raised=0))  # (an hour ago, a second apart)
    config = _config(tmp_path, app, incremental=True, lag="0s")
    first = ragmem.evaluate(config=config)
    assert first.summary["n_examples"] == 6 and not any("written after" in n for n in first.summary["notes"])
    late_start = time.time_ns() - 1800 * 10**9  # started half an hour ago: inside the first window
    traffic.write_mlflow(app, "app", traffic.plan(2, raised=0, first=6, start_ns=late_start))
    traffic.write_mlflow(app, "app", traffic.plan(3, raised=0, first=8, start_ns=time.time_ns(), step_ns=10**6))
    second = ragmem.evaluate(config=config)
    assert second.summary["n_examples"] == 3  # the new ones; the late two belong to the first window
    (note,) = [n for n in second.summary["notes"] if "written after" in n]
    assert note.startswith(f"2 traces started in the previous window (run {first.run_id}, until ")
    assert ("were written after it was read: no window judges them (data.traces.lag, now 0s, holds a window's end "
            "back longer)") in note
    traffic.write_mlflow(app, "app", traffic.plan(1, raised=0, first=11, start_ns=time.time_ns()))
    third = ragmem.evaluate(config=config)  # (nothing late in the second window: no note)
    assert not any("written after" in n for n in third.summary["notes"])
