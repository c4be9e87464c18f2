"""A new SQLite store made from a copy of an empty one, not by MLflow's migrations each time.

MLflow makes a new SQLite store by running every one of its schema migrations (alembic: over a
hundred of them): 1.2-1.5 s of CPU, 1.6-2.0 s in all, measured here, in the first process that opens
the store. The first run of every new project pays it, and so does each store a test makes. The same
migrations give the same empty schema every time, for one MLflow version. So the first new store
made with an MLflow version runs them once into a template kept in the user's cache,
``$RAGMEM_CACHE_DIR`` (default ``$XDG_CACHE_HOME/ragmem``, that is ``~/.cache/ragmem``), as
``mlflow-<version>-empty.db``. Every later new store is a copy of it, in milliseconds.

The template holds MLflow's migrated tables and nothing MLflow writes when it opens a store: its
Default experiment (id 0, with an artifact location and times of its own) is not in it. MLflow adds
that experiment when it opens the copy, as it does for a store it migrated itself
(``SqlAlchemyStore._initialize_store_state``). It also checks the schema's revision against its own
(``_verify_schema``). A store made either way reads the same: ``tests/tracking/test_empty_store.py``
compares every table, row and schema statement.

A template that cannot be made or copied (a read-only cache, a full disk) is never an error: the
store is then made by MLflow's migrations, as before. One that cannot serve (a damaged file, another
MLflow's schema under the same version: checked before each copy) is made again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

from ragmem.runtime import home

log = logging.getLogger("ragmem")


def cache_dir() -> Path:
    """``$RAGMEM_CACHE_DIR``, else ``$XDG_CACHE_HOME/ragmem`` (``~/.cache/ragmem``)."""
    given = os.environ.get("RAGMEM_CACHE_DIR")
    if given:
        return Path(given).expanduser().resolve()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser().resolve() / "ragmem"


def template_path() -> Path:
    """The empty store of this MLflow version: ``<cache_dir>/mlflow-<version>-empty.db``."""
    from mlflow.version import VERSION  # (mlflow: imported by whoever makes a store)

    return cache_dir() / f"mlflow-{VERSION}-empty.db"


def _migrated(path: Path) -> None:
    """MLflow's migrations, run into a new SQLite file at ``path`` (its tables, none of its rows)."""
    from mlflow.store.db.utils import _initialize_tables, create_sqlalchemy_engine

    engine = create_sqlalchemy_engine(f"sqlite:///{path}")
    try:
        _initialize_tables(engine)
    finally:
        engine.dispose()


def _usable(path: Path) -> bool:
    """Whether the template at ``path`` is a sound SQLite file at the schema revision this MLflow
    migrates to (a damaged file, or another MLflow's schema under the same version, is not)."""
    from mlflow.store.db.utils import _get_latest_schema_revision

    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            sound = db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
            revision = sound and db.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.Error:
        return False
    return bool(revision) and revision[0] == _get_latest_schema_revision()


def _template() -> Path | None:
    """The template, made if need be (under a lock: one process migrates, the others wait and copy;
    one that cannot serve is made again); ``None`` when it cannot be (the reason logged at debug level)."""
    path = template_path()
    try:
        with home.file_lock(path.with_name(path.name + ".lock"), what="the empty MLflow store"):
            if path.is_file() and not _usable(path):
                log.debug("%s cannot serve (damaged, or another schema): made again", path)
                path.unlink()
            if not path.is_file():
                with tempfile.TemporaryDirectory(dir=path.parent, prefix=".making-") as tmp:
                    made = Path(tmp) / path.name
                    _migrated(made)
                    os.replace(made, path)  # (whole or not at all: a reader never sees a half-made one)
        return path
    except Exception as exc:  # noqa: BLE001 (a cache that cannot be used: the store is migrated as before)
        log.debug("the empty MLflow store could not be kept in %s (%s); migrating the new store",
                  path.parent, f"{type(exc).__name__}: {exc}")
        return None


def copy_into(db: Path) -> None:
    """Make the new store ``db`` as a copy of the template; without a template, or when the copy fails
    (nothing is left at ``db``), MLflow migrates the store when it opens it."""
    template = _template()
    if template is None:
        return
    partial: Path | None = None
    try:
        with tempfile.NamedTemporaryFile(dir=db.parent, prefix=f".{db.name}.", delete=False) as handle:
            partial = Path(handle.name)
        shutil.copyfile(template, partial)
        os.replace(partial, db)
    except OSError as exc:
        if partial is not None:
            partial.unlink(missing_ok=True)
        log.debug("the empty MLflow store could not be copied to %s (%s)", db, exc)
