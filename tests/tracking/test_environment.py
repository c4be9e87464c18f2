"""The machine checked before any work: the tracking store and the ragmem home (one line, exit 2)."""

from __future__ import annotations

import re
import sqlite3

import pytest

import ragmem
from ragmem.errors import ConfigError
from ragmem.tracking.uri import check_tracking


DATA = "ragmem/datasets/demo_bilingual.json"


@pytest.mark.parametrize("uri, message", [
    ("bogus://x", "unsupported scheme 'bogus'"),
    ("/just/a/path", "unsupported scheme '(none)'"),
    ("sqlite://relative.db", "expected sqlite:///relative/path.db"),
    ("sqlite:////sys/ragmem-test/mlflow.db", "the folder /sys/ragmem-test cannot be written"),
])
def test_a_tracking_uri_that_cannot_store_runs_is_refused(uri, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_tracking(uri, "MLFLOW_TRACKING_URI")


def test_a_store_that_is_not_a_sqlite_database_is_named(tmp_path):
    (tmp_path / "garbage.db").write_bytes(b"\x00not a database at all" * 100)
    (tmp_path / "folder.db").mkdir()
    for name, message in (("garbage.db", "is not a SQLite database"), ("folder.db", "is a folder")):
        with pytest.raises(ConfigError, match=message):
            check_tracking(f"sqlite:///{tmp_path / name}", "tracking.uri")
    good = tmp_path / "good.db"
    sqlite3.connect(good).execute("CREATE TABLE t (x)").connection.close()
    check_tracking(f"sqlite:///{good}", "tracking.uri")  # an existing database, and a new one, are fine
    check_tracking(f"sqlite:///{tmp_path / 'new' / 'mlflow.db'}", "tracking.uri")


def test_the_api_checks_the_store_before_any_work(tmp_path, monkeypatch):
    (tmp_path / "broken.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)  # a header, then garbage
    with pytest.raises(ConfigError, match="broken.db cannot be used as a store"):
        ragmem.evaluate(DATA, tracking={"uri": f"sqlite:///{tmp_path / 'broken.db'}",
                                        "artifact_root": str(tmp_path / "artifacts")})
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "a-file" / "home"))
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ConfigError, match="RAGMEM_HOME: the folder .* cannot be written"):
        ragmem.evaluate(DATA, track=False)


def test_the_cli_names_a_corrupted_store_and_starts_nothing(tmp_path, ragmem_main, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / ".ragmem"))
    (tmp_path / "mlruns").mkdir()
    (tmp_path / "mlruns" / "mlflow.db").write_bytes(b"\x89PNG not a database" * 50)
    from tests.conftest import ROOT

    proc = ragmem_main(["run", str(ROOT / "configs" / "default.yaml"), "--data", str(ROOT / DATA)], cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    db = tmp_path.resolve() / "mlruns" / "mlflow.db"  # the home's store, named in full
    assert proc.stderr.startswith(f"error: the default tracking store sqlite:///{db}: {db} is not a SQLite database")
    assert not (tmp_path / ".ragmem" / "prefect").exists()  # no Prefect server was started


def test_a_dask_scheduler_that_does_not_answer_stops_the_run_before_any_call():
    """orchestration.dask_address is probed with the other endpoints: one line, exit 2, nothing run."""
    import socket

    from ragmem.config.loading import RunConfig, resolve_config
    from ragmem.clients.endpoints import EndpointDown, configured, preflight, probe

    listening = socket.create_server(("127.0.0.1", 0))
    closed = socket.create_server(("127.0.0.1", 0))
    dead_port = closed.getsockname()[1]
    closed.close()
    try:
        cfg = RunConfig.from_dict(resolve_config(extra={"orchestration": {
            "task_runner": "dask", "dask_address": f"tcp://127.0.0.1:{dead_port}"}}))
        [endpoint] = [e for e in configured(cfg) if e.setting == "orchestration.dask_address"]
        with pytest.raises(EndpointDown, match=rf"^orchestration.dask_address tcp://127.0.0.1:{dead_port}: "
                                               r"cannot connect \(Connection refused\); nothing was run"):
            preflight([endpoint])
        alive = endpoint.__class__(endpoint.setting, f"tcp://127.0.0.1:{listening.getsockname()[1]}", "dask")
        assert probe(alive) is None
        assert "expected tcp://HOST:PORT" in probe(endpoint.__class__(endpoint.setting, "nonsense", "dask"))
    finally:
        listening.close()


@pytest.mark.parametrize("damage", ["index page", "table page"])
def test_a_store_that_fails_sqlite_s_integrity_check_is_named_with_the_way_out(tmp_path, damage):
    db = tmp_path / "mlflow.db"
    connection = sqlite3.connect(db)
    connection.executescript("CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT); CREATE INDEX by_name ON runs (name);")
    connection.executemany("INSERT INTO runs (name) VALUES (?)", ((f"run {i:05d} " + "x" * 50,) for i in range(3000)))
    connection.commit()
    page_size = connection.execute("PRAGMA page_size").fetchone()[0]
    root = connection.execute("SELECT rootpage FROM sqlite_master WHERE name = ?",
                              ("by_name" if damage == "index page" else "runs",)).fetchone()[0]
    connection.close()
    check_tracking(f"sqlite:///{db}", "tracking.uri")  # whole: passes
    with open(db, "r+b") as file:  # one page of the tree garbled (a torn write, a bad sector)
        file.seek((root - 1) * page_size)
        file.write(b"\xa5" * page_size)
    with pytest.raises(ConfigError) as refused:
        check_tracking(f"sqlite:///{db}", "tracking.uri")
    line = str(refused.value)
    assert line.startswith(f"tracking.uri sqlite:///{db}: {db} is damaged (") and "\n" not in line
    assert f"nothing was written to it. Keep it aside and start a new store (mv {db} {db}.damaged)" in line
    assert f"sqlite3 {db} .recover | sqlite3 {tmp_path / 'mlflow-recovered.db'}" in line
