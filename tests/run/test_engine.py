"""The run engine and the run lifecycle: one place sets a run's status, logging is idempotent,
and a run leaves the process as it found it."""

import json
import logging
import os
import signal
import sqlite3
import sys
import threading

import pandas as pd
import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from ragmem import tracking
import ragmem
from ragmem.config.loading import RunConfig
from ragmem.errors import Terminated
from ragmem.run import engine
from ragmem.tracking import tracked_run, Tracker


@pytest.fixture
def store(shared_store):
    return shared_store


def _data(tmp_path, n=6):
    path = tmp_path / "data.json"
    path.write_text(json.dumps([{"id": f"e{i}", "query": f"what is item {i}?", "reference_answer": f"item {i} is blue",
                                 "label": i % 2} for i in range(n)]))
    return path


def _status(store, run_id):
    run = MlflowClient(store["uri"]).get_run(run_id)
    return run.info.status, run.data.tags.get("ragmem.error")


def test_tracked_run_sets_every_ending(store):
    tracker = Tracker(store["uri"], store["artifact_root"])
    with tracked_run(tracker, "lifecycle", "ok") as run:
        pass
    assert _status(store, run.id) == ("FINISHED", None)

    with pytest.raises(ValueError):
        with tracked_run(tracker, "lifecycle", "fails") as run:
            raise ValueError("the judge exploded")
    assert _status(store, run.id) == ("FAILED", "ValueError: the judge exploded")

    with pytest.raises(KeyboardInterrupt):
        with tracked_run(tracker, "lifecycle", "ctrl-c") as run:
            raise KeyboardInterrupt
    assert _status(store, run.id) == ("KILLED", "KeyboardInterrupt")

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated):
        with tracked_run(tracker, "lifecycle", "sigterm") as run:
            os.kill(os.getpid(), signal.SIGTERM)
    assert _status(store, run.id) == ("KILLED", f"Terminated: terminated by signal {int(signal.SIGTERM)}")
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is put back

    created = tracker.create_run("lifecycle", "adopted")
    with tracked_run(tracker, "lifecycle", run_id=created) as run:
        assert run.id == created
    assert _status(store, created) == ("FINISHED", None)

    with tracked_run(None, "lifecycle") as run:  # tracking off: nothing recorded, no error
        assert run.id is None


def test_children_left_running_end_with_their_sweep(store):
    tracker = Tracker(store["uri"], store["artifact_root"])
    done, stuck = tracker.create_run("children", "done"), tracker.create_run("children", "stuck")
    with tracked_run(tracker, "children", run_id=done):
        pass
    tracking.end_unfinished(tracker, [done, stuck], "KILLED", "sweep ended: KeyboardInterrupt")
    assert _status(store, done) == ("FINISHED", None)
    assert _status(store, stuck) == ("KILLED", "sweep ended: KeyboardInterrupt")


def test_a_failing_run_is_failed_with_its_reason(store, tmp_path, monkeypatch):
    cfg = RunConfig.from_dict({"data": {"files": [{"path": str(_data(tmp_path))}]}, "tracking": store,
                               "experiment": "fails", "metrics": ["f1"],
                               "agent": {"type": "python", "target": "tests.sample_agents:echo"}})

    class Boom(engine.Steps):
        def score(self, *args, **kwargs):
            raise RuntimeError("metric blew up")

    with pytest.raises(RuntimeError):
        engine.evaluate(cfg, Boom())
    client = MlflowClient(store["uri"])
    (run,) = client.search_runs([client.get_experiment_by_name("fails").experiment_id])
    assert run.info.status == "FAILED" and run.data.tags["ragmem.error"] == "RuntimeError: metric blew up"


def test_logging_twice_writes_no_trace_or_metric_twice(store, tmp_path, monkeypatch):
    result = ragmem.evaluate(_data(tmp_path), track=True, tracking=store, experiment="idem", metrics=["f1", "avg_latency"],
                             agent={"type": "python", "target": "tests.sample_agents:echo"})
    client = MlflowClient(store["uri"])
    tracker = Tracker(store["uri"], store["artifact_root"])
    run = tracking.TrackedRun(result.run_id, tracker)
    where = [client.get_run(result.run_id).info.experiment_id]
    traces_before = len(client.search_traces(locations=where, run_id=result.run_id))
    assert traces_before == 6
    # a retried log step runs again on the same run (its plots and table files made again on its thread:
    # no worker process is asked for, whatever the table's size; each got a copy of the table, and a
    # 10k-example run peaked at 1 GB)
    from ragmem.tracking import files

    made = []

    def noted(fn):
        def wrapped(*args, **kwargs):
            made.append((fn.__name__, os.getpid(), threading.current_thread().name))
            return fn(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(files, "plot_files", noted(files.plot_files))
    monkeypatch.setattr(files, "table_files", noted(files.table_files))
    cfg = RunConfig.from_dict({"tracking": store, "experiment": "idem"})
    n = tracking.record_run(run, cfg.raw, result.params, result.metrics, {"n_examples": 6}, result.table,
                            result.summary, (), (), max_traces=200)
    assert sorted((name, pid, thread.split("_")[0]) for name, pid, thread in made) == [
        ("plot_files", os.getpid(), "ragmem-files"), ("table_files", os.getpid(), "ragmem-files")]
    assert n == 6 and len(client.search_traces(locations=where, run_id=result.run_id)) == traces_before
    assert len(client.get_metric_history(result.run_id, "f1")) == 1
    assert len(client.get_metric_history(result.run_id, "avg_latency")) == 1
    # ...and the per-example table is replaced, not appended to; MLflow's table tag names it once
    table = json.loads(open(client.download_artifacts(result.run_id, "examples.json", str(tmp_path))).read())
    assert len(table["data"]) == 6 and table["columns"] == list(result.table.columns)
    csv = pd.read_csv(client.download_artifacts(result.run_id, "examples.csv", str(tmp_path)))
    assert list(csv.columns) == list(result.table.columns) and csv["id"].astype(str).tolist() == table_ids(table)
    logged = json.loads(client.get_run(result.run_id).data.tags["mlflow.loggedArtifacts"])
    assert logged == [{"path": "examples.json", "type": "table"}]
    histogram = client.download_artifacts(result.run_id, "plots/latency_histogram.png", str(tmp_path))
    assert open(histogram, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def table_ids(table: dict) -> list[str]:
    return [str(row[table["columns"].index("id")]) for row in table["data"]]


def test_the_logged_table_keeps_15_digits_nulls_and_nested_values(store, tmp_path):
    import pandas as pd

    tracker = Tracker(store["uri"], store["artifact_root"])
    run_id = tracker.create_run("table-format")
    frame = pd.DataFrame({"id": ["a", "b"], "score": [0.1234567890123456, float("nan")], "query": ["向量", None],
                          "contexts": [[{"text": "中文"}], []], "label": pd.array([1, None], dtype="Int64")})
    tracker.log_table(run_id, frame, "examples")
    client = MlflowClient(store["uri"])
    table = json.loads(open(client.download_artifacts(run_id, "examples.json", str(tmp_path)), encoding="utf-8").read())
    assert table["columns"] == ["id", "score", "query", "contexts", "label"]
    assert table["data"] == [["a", 0.123456789012346, "向量", '[{"text":"中文"}]', 1], ["b", None, None, "[]", None]]


@pytest.mark.parametrize("error, transient", [
    (ConnectionError("refused"), True),
    (sqlite3.OperationalError("database is locked"), True),
    (MlflowException("RESOURCE_DOES_NOT_EXIST: run not found"), False),
    (ValueError("bad value"), False),
    (PermissionError("read-only store"), False),
])
def test_only_transient_store_errors_are_retried(error, transient):
    assert tracking.is_transient(error) is transient


def test_a_run_leaves_the_process_as_it_found_it(store, tmp_path, monkeypatch):
    from mlflow.tracking._tracking_service import utils as tracking_utils

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_local_agent.py").write_text("def answer(query):\n    return query\n")
    uri_before, path_before = tracking_utils._tracking_uri, list(sys.path)
    result = ragmem.evaluate(_data(tmp_path), tracking=store, experiment="clean", metrics=["avg_latency"],
                             agent={"type": "python", "target": "my_local_agent:answer"})
    assert result.metrics["avg_latency"] is not None and result.summary["counts"]["n_agent_errors"] == 0
    assert "MLFLOW_TRACKING_URI" not in os.environ
    assert tracking_utils._tracking_uri == uri_before   # traces were written, the process-wide URI put back
    assert sys.path == path_before                      # the agent's folder was importable only while importing


def test_importing_the_library_changes_nothing(monkeypatch):
    import importlib

    import matplotlib

    import ragmem.tracking.plots

    env_before = dict(os.environ)
    loggers = ("mlflow.store.db.utils", "alembic", "mlflow.tracing.export.async_export_queue")
    levels_before = [logging.getLogger(n).level for n in loggers]
    backend_before = dict.__getitem__(matplotlib.rcParams, "backend")
    importlib.reload(tracking)
    importlib.reload(ragmem.tracking.plots)
    ragmem.tracking.plots.confusion_matrix_figure({"confusion_tp": 3, "confusion_tn": 1}).savefig(os.devnull, format="png")
    assert dict(os.environ) == env_before
    assert [logging.getLogger(n).level for n in loggers] == levels_before
    assert dict.__getitem__(matplotlib.rcParams, "backend") == backend_before


def test_index_builds_are_counted_per_run(tmp_path):
    config = {"agent": {"type": "reference"}, "corpus": {"chunk_size": 177}, "tracking": {"enabled": False},
              "data": {"files": [{"path": str(_data(tmp_path, 2))}]}, "metrics": ["avg_latency"]}
    first = engine.evaluate(RunConfig.from_dict(config))
    again = engine.evaluate(RunConfig.from_dict({**config, "retriever": {"top_k": 2}}))
    assert (first.index_builds, again.index_builds) == (1, 0)


def test_a_secret_in_the_config_is_never_logged(store, tmp_path):
    secret = "sk-never-log-this-0123"
    result = ragmem.evaluate(_data(tmp_path, 2), tracking=store, experiment="secrets", metrics=["f1"],
                             agent={"type": "python", "target": "tests.sample_agents:Keyed",
                                    "params": {"api_key": secret, "options": {"token": secret, "depth": 1}}})
    client = MlflowClient(store["uri"])
    config = json.loads(open(client.download_artifacts(result.run_id, "config.json", str(tmp_path))).read())
    assert config["agent"]["params"] == {"api_key": "***", "options": {"token": "***", "depth": 1}}
    assert secret not in json.dumps(client.get_run(result.run_id).data.params) + json.dumps(result.summary)


def test_when_every_call_fails_classification_is_null_not_0(tmp_path, store):
    from mlflow import MlflowClient

    path = tmp_path / "fails.json"
    path.write_text(json.dumps([{"query": "fail now", "reference_answer": "r", "label": 1},
                                {"query": "fail again", "reference_answer": "r", "label": 0}]))
    result = ragmem.evaluate(path, tracking=store, experiment="all-fail", metrics=["accuracy", "precision", "recall", "f1"],
                             agent={"type": "python", "target": "tests.sample_agents:sometimes_fails", "retries": 0})
    assert result.summary["n_errors"] == 2
    assert [result.metrics[n] for n in ("accuracy", "precision", "recall", "f1")] == [None] * 4
    assert result.metrics["n_classified"] == 0 and any("no example was classified" in n for n in result.summary["notes"])
    logged = MlflowClient(store["uri"]).get_run(result.run_id).data.metrics
    assert not {"accuracy", "precision", "recall", "f1"} & set(logged) and logged["count/n_classified"] == 0  # null: not logged


def test_auto_batches_grow_for_a_fast_agent_and_keep_256_for_a_slow_one():
    from ragmem.run.pipeline import Batches

    def sizes(seconds_per_example: float, n: int = 20000, size="auto") -> list[int]:
        batches, seen, out = Batches(list(range(n)), size), [], []
        for batch in batches:
            out.append(len(batch))
            seen += batch
            batches.took(len(batch) * seconds_per_example)
        assert seen == list(range(n))  # every example once, in order
        return out

    assert sizes(1e-5) == [256, 2048, 16384, 1312]      # replayed data: 4 batches, not 79
    assert sizes(0.002)[:3] == [256, 1000, 1000]        # about 2 s a batch
    assert set(sizes(0.5, 1000)) == {256, 232}          # an LLM agent: the first size throughout
    assert sizes(1e-5, 1000, 300) == [300, 300, 300, 100]  # a fixed size stays fixed, however fast


def test_ending_an_interrupted_run_on_a_locked_store_logs_no_traceback():
    """A Ctrl+C in the middle of a write leaves SQLite locked; MLflow's SQL store logs the caught
    "database is locked" with its traceback before raising it. Ending the run handles that error
    (the run stays RUNNING, resumable), so MLflow's log of it is muted: the user sees one line."""
    from ragmem.tracking.lifecycle import _end

    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append
    store_log = logging.getLogger("mlflow.store.db.utils")
    store_log.addHandler(handler)

    class Locked:
        def set_tags(self, run_id, tags):
            try:
                raise sqlite3.OperationalError("database is locked")
            except sqlite3.OperationalError:
                store_log.exception("SQLAlchemy database error. The following exception is caught.")
                raise

        def _terminate(self, run_id, status):
            raise AssertionError("not reached")

    try:
        _end(Locked(), "run", "KILLED", KeyboardInterrupt())  # no exception: the original one is what counts
        assert seen == [] and not store_log.disabled  # muted while ending, and only then
        store_log.error("after")
        assert [r.getMessage() for r in seen] == ["after"]
    finally:
        store_log.removeHandler(handler)


def test_store_errors_are_muted_on_the_ending_thread_only_and_overlaps_leave_nothing_muted():
    """Two threads end runs at once, their blocks overlapping out of order (A in, B in, A out, B out):
    while A is inside, B's own store error is still logged once B has left; afterwards nothing is muted."""
    from ragmem.tracking.lifecycle import store_errors_muted

    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    store_log = logging.getLogger("mlflow.store.db.utils")
    store_log.addHandler(handler)
    a_in, b_in, a_out, b_out = (threading.Event() for _ in range(4))

    def a():
        with store_errors_muted():
            a_in.set()
            assert b_in.wait(60)
            store_log.error("a inside")
        a_out.set()

    def b():
        assert a_in.wait(60)
        with store_errors_muted():
            b_in.set()
            assert a_out.wait(60)
            store_log.error("b inside")
        b_out.set()
        store_log.error("b after")

    try:
        threads = [threading.Thread(target=a), threading.Thread(target=b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert b_out.is_set() and seen == ["b after"]
        store_log.error("main after")
        assert seen == ["b after", "main after"] and not store_log.disabled
    finally:
        store_log.removeHandler(handler)
