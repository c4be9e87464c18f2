"""The tracking store's URI: its scheme, and whether a SQLite store can be created or written (or,
for the traces an application wrote, read: :func:`check_readable`).

Checked before any work (:func:`ragmem.run.environment.check`); a problem is one
:class:`ragmem.errors.ConfigError` line naming the URI or path.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from pathlib import Path
from urllib.parse import urlparse

from ragmem.errors import ConfigError

DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")  # MLflow's SQL store
SCHEMES = (*DATABASE_SCHEMES, "http", "https", "databricks", "databricks-uc", "file")
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: a store up to this size gets SQLite's full ``integrity_check`` before each run (measured here: ~80 ms
#: per MB on a 386 MB store, 31 s); a larger one the ``quick_check`` (~3 ms per MB: 1 s), which finds
#: broken pages and trees but not an index that disagrees with its table
FULL_CHECK_BYTES = 32 << 20


def writable_folder(folder: Path, what: str) -> None:
    """``folder`` exists and takes a file, or could be made: its nearest existing ancestor is a folder
    that takes a file (nothing is left behind: a check creates no folder)."""
    folder = Path(os.path.abspath(folder))
    existing = folder
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(20, "Not a directory", str(existing))
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".ragmem-check-"):
            pass
    except OSError as exc:
        raise ConfigError(f"{what}: the folder {folder} cannot be written ({exc.strerror or exc})") from None


def sqlite_file(uri: str) -> Path | None:
    """The file of a ``sqlite:///`` store, else ``None``."""
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


def _head(path: Path, what: str) -> bytes:
    """The first bytes of ``path``, where a SQLite database has its magic string."""
    try:
        with open(path, "rb") as handle:
            return handle.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise ConfigError(f"{what}: {path} cannot be read ({exc.strerror or exc})") from None


def check_sqlite(path: Path, what: str) -> None:
    """The SQLite store at ``path`` can be created, or is a SQLite database that can be written."""
    writable_folder(path.parent, what)
    if not path.exists() or path.stat().st_size == 0:
        return
    if path.is_dir():
        raise ConfigError(f"{what}: {path} is a folder, not a SQLite database file")
    if _head(path, what) != _SQLITE_MAGIC:
        raise ConfigError(f"{what}: {path} is not a SQLite database (corrupted, or another kind of file); "
                          f"move it away to start a new store")
    try:
        connection = sqlite3.connect(path, timeout=30)
        try:
            connection.execute("PRAGMA schema_version").fetchone()
            connection.execute("BEGIN IMMEDIATE")  # a write lock: fails on a read-only file or file system
            connection.rollback()
            check = "integrity_check" if path.stat().st_size <= FULL_CHECK_BYTES else "quick_check"
            found = [row[0] for row in connection.execute(f"PRAGMA {check}(3)")]
        finally:
            connection.close()
    except sqlite3.DatabaseError as exc:
        if "malformed" in str(exc) or "corrupt" in str(exc):
            raise ConfigError(_damaged(what, path, str(exc))) from None
        raise ConfigError(f"{what}: {path} cannot be used as a store ({exc})") from None
    if found != ["ok"]:
        first = " ".join(found[0].replace("*** in database main ***", "").split())[:200]
        raise ConfigError(_damaged(what, path, f"SQLite's {check}: {first}"))


def check_readable(uri: str, setting: str) -> None:
    """A store an application's traces are read from is one, before any work: a SQLite file that
    exists (reading never creates one), is readable, is a SQLite database and holds MLflow's tables;
    else a ConfigError in one line naming ``setting``. (A server is probed by
    :func:`ragmem.clients.endpoints.check_store`.)"""
    path = sqlite_file(uri)
    if path is None:
        return
    where = f"{setting} {uri}"
    if not path.exists():
        raise ConfigError(f"{where}: no store at {path} (reading traces never creates one: check the path)")
    if not path.is_file():
        raise ConfigError(f"{where}: {path} is not a file")
    head = _head(path, where)
    if head != _SQLITE_MAGIC:
        raise ConfigError(f"{where}: {path} is not an SQLite database" + (" (an empty file)" if not head else ""))
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{where}: {path} cannot be read as a store ({exc})") from None
    if not {"experiments", "trace_info"} <= tables:
        raise ConfigError(f"{where}: {path} is an SQLite database but not an MLflow store with traces "
                          f"(no experiments and trace_info tables)")


def accepts_writes(uri: str) -> bool:
    """Whether a store takes writes (the assessments written back onto traces): a SQLite file is asked
    for a write lock and let go at once, as :func:`check_sqlite` asks (what a read-only file, folder or
    mount refuses, whoever runs it); a busy store takes writes; a server answers for itself (assumed)."""
    path = sqlite_file(uri)
    if path is None:
        return True
    try:
        with contextlib.closing(sqlite3.connect(str(path), timeout=1.0)) as db:
            db.execute("BEGIN IMMEDIATE")
            db.rollback()
    except sqlite3.OperationalError as exc:
        return "readonly" not in str(exc).replace(" ", "") and "read-only" not in str(exc)
    return True


def _damaged(what: str, path: Path, problem: str) -> str:
    """The line for a store that fails SQLite's check, with the ways out; nothing was written to it."""
    return (f"{what}: {path} is damaged ({problem}); nothing was written to it. Keep it aside and start a "
            f"new store (mv {path} {path}.damaged), or recover what it holds: sqlite3 {path} .recover | "
            f"sqlite3 {path.with_name(path.stem + '-recovered.db')}")


def tracking_scheme(uri: str) -> str:
    """The scheme of a tracking URI, without its driver (``postgresql+psycopg2`` -> ``postgresql``)."""
    return urlparse(uri).scheme.split("+")[0].lower()


def check_tracking(uri: str, source: str) -> None:
    """``uri`` (from ``source``: ``tracking.uri``, ``MLFLOW_TRACKING_URI`` or the default) can store runs."""
    scheme = tracking_scheme(uri)
    what = f"{source} {uri}"
    if scheme not in SCHEMES:
        raise ConfigError(f"{what}: unsupported scheme {scheme or '(none)'!r}; use sqlite:///path/mlflow.db, "
                          f"http(s)://host:port of a tracking server, or a database URL "
                          f"({', '.join(SCHEMES)})")
    if scheme == "sqlite":
        path = sqlite_file(uri)
        if path is None or uri in ("sqlite:///", "sqlite:///:memory:"):
            raise ConfigError(f"{what}: expected sqlite:///relative/path.db or sqlite:////absolute/path.db")
        check_sqlite(path, what)


def tracking_source(cfg) -> str:
    if cfg.tracking.uri:
        return "tracking.uri"
    return "MLFLOW_TRACKING_URI" if os.environ.get("MLFLOW_TRACKING_URI") else "the default tracking store"
