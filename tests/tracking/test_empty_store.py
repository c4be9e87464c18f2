"""A new SQLite store copied from an empty one (ragmem.tracking.empty_store) reads as one MLflow
migrated itself: every schema statement, table and row, the Default experiment and the ids MLflow
gives next. A template that cannot serve (damaged, another schema, no cache folder) is never an
error: the store is migrated as before."""

from __future__ import annotations

import sqlite3

import mlflow.store.db.utils as db_utils
import pytest
from mlflow import MlflowClient

from ragmem.tracking import empty_store
from ragmem.tracking.store import prepare_local_store

#: the columns a store fills with the time it was made
_TIMES = {"creation_time", "last_update_time"}


def _statement(sql: str | None) -> tuple[str, ...] | None:
    """A schema statement as the set of its lines: MLflow's own migrations write a table's constraints
    in an order that varies from one store to the next (two stores MLflow made differ so: the CHECK
    constraints of ``runs``), which says nothing about the store."""
    return None if sql is None else tuple(sorted(line.strip().rstrip(",").strip() for line in sql.splitlines()))


def _contents(path) -> dict:
    """Every schema statement, and every table's rows (times left out), of the SQLite file ``path``."""
    with sqlite3.connect(path) as db:
        schema = sorted(((kind, name, table, _statement(sql)) for kind, name, table, sql
                         in db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")), key=str)
        rows = {}
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            cursor = db.execute(f'SELECT * FROM "{table}"')
            keep = [i for i, d in enumerate(cursor.description) if d[0] not in _TIMES]
            rows[table] = sorted((tuple(row[i] for i in keep) for row in cursor), key=str)
    return {"schema": schema, "rows": rows}


@pytest.fixture
def migrations(monkeypatch):
    """The number of times MLflow's migrations ran in this test."""
    ran = []
    real = db_utils._initialize_tables
    monkeypatch.setattr(db_utils, "_initialize_tables", lambda engine: (ran.append(engine.url), real(engine))[1])
    return ran


def _used(uri: str) -> str:
    """An experiment, a run and a metric written to the store at ``uri``: the ids MLflow gave."""
    client = MlflowClient(uri)
    experiment = client.create_experiment("e")
    run = client.create_run(experiment)
    client.log_metric(run.info.run_id, "m", 0.5)
    return experiment


def test_a_copied_store_reads_as_one_mlflow_migrated(tmp_path, monkeypatch, migrations):
    monkeypatch.chdir(tmp_path)  # (the Default experiment's artifact location is made from the working folder)
    monkeypatch.setenv("RAGMEM_CACHE_DIR", str(tmp_path / "cache"))
    by_mlflow = f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}"
    (tmp_path / "mlflow").mkdir()
    MlflowClient(by_mlflow).search_experiments()  # MLflow's own making of a store, without ragmem
    assert len(migrations) == 1
    first, second = (f"sqlite:///{tmp_path / name / 'mlflow.db'}" for name in ("first", "second"))
    prepare_local_store(first)  # the template is made (migrated once), then copied
    assert len(migrations) == 2 and empty_store.template_path().parent == tmp_path / "cache"
    prepare_local_store(second)  # a copy: no migration
    assert len(migrations) == 2
    expected = _contents(tmp_path / "mlflow" / "mlflow.db")
    assert expected["rows"]["experiments"][0][:3] == (0, "Default", str(tmp_path / "mlruns" / "0"))
    for uri in (first, second):
        assert _contents(uri[len("sqlite:///"):]) == expected
    assert _used(first) == _used(second) == _used(by_mlflow) == "1"
    prepare_local_store(second)  # a store that is there is opened as it is
    assert len(migrations) == 2


def test_a_template_that_cannot_serve_leaves_the_store_to_mlflows_migrations(tmp_path, monkeypatch, migrations):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGMEM_CACHE_DIR", str(tmp_path / "cache"))
    template = empty_store.template_path()
    template.parent.mkdir()
    template.write_bytes(b"not a database" * 100)  # damaged
    prepare_local_store(f"sqlite:///{tmp_path / 'a.db'}")  # made again, then copied
    assert _used(f"sqlite:///{tmp_path / 'a.db'}") == "1" and len(migrations) == 1 and empty_store._usable(template)

    with sqlite3.connect(template) as db:  # another MLflow's schema under this version's name
        db.execute("UPDATE alembic_version SET version_num = 'not-this-mlflows'")
    prepare_local_store(f"sqlite:///{tmp_path / 'b.db'}")
    assert _used(f"sqlite:///{tmp_path / 'b.db'}") == "1" and len(migrations) == 2 and empty_store._usable(template)

    monkeypatch.setenv("RAGMEM_CACHE_DIR", str(tmp_path / "a.db" / "cache"))  # a file where the folder would be
    prepare_local_store(f"sqlite:///{tmp_path / 'c.db'}")  # no template: MLflow migrates the store
    assert _used(f"sqlite:///{tmp_path / 'c.db'}") == "1" and len(migrations) == 3
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no partial copy left
