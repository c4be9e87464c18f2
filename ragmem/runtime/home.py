"""A project's home: the one folder its runs belong to, found as git finds ``.git``.

The home is the nearest folder, from the working directory upward, that holds a ``ragmem.toml``
(written by ``ragmem init``) or an existing ``mlruns/`` folder; when there is none, the working
directory. A command given a config file that lies in another home runs in that home
(:func:`enter_config_home`). Everything a run keeps belongs to the home, wherever in the project it is started:

- the tracking store: ``sqlite:///<home>/mlruns/mlflow.db``, artifacts under ``<home>/mlruns/artifacts``
  (a relative ``sqlite:///`` path or artifact root, in the config or in ``MLFLOW_TRACKING_URI``, is
  read relative to the home, not to the working directory);
- ragmem's working folder ``<home>/.ragmem`` (``$RAGMEM_HOME`` replaces it): journals, the judge's
  cache, fetched datasets, the last error's traceback. (The local Prefect server is one per machine
  user, shared by every home: :mod:`ragmem.orchestration.server`.)
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Iterator

MARKER = "ragmem.toml"
STORE_FOLDER = "mlruns"
DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"
DEFAULT_ARTIFACT_ROOT = "mlruns/artifacts"
_SQLITE = "sqlite:///"


def marked_root(start: Path) -> Path | None:
    """The nearest folder from ``start`` upward holding ``ragmem.toml`` or an ``mlruns/`` folder, or ``None``."""
    here = start.resolve()
    return next((f for f in (here, *here.parents) if (f / MARKER).is_file() or (f / STORE_FOLDER).is_dir()), None)


def project_root(start: Path | None = None) -> Path:
    """The home: ``$RAGMEM_PROJECT`` (set by a command given a config file in another home:
    :func:`enter_config_home`); else the nearest folder from ``start`` (default: the working directory)
    upward holding ``ragmem.toml`` or an ``mlruns/`` folder; else ``start`` itself."""
    if start is None and os.environ.get("RAGMEM_PROJECT"):
        return Path(os.environ["RAGMEM_PROJECT"]).resolve()
    here = (start or Path.cwd()).resolve()
    return marked_root(here) or here


def enter_config_home(config: str | Path | None) -> Path | None:
    """A config file given by path that lies in a home (:func:`marked_root` of its folder) other than
    the working directory's: that home becomes this process's (and its children's), so ``ragmem run
    ../my-eval/ragmem.yaml`` stores its run in ``my-eval``. Returns the home entered, or ``None`` (no
    such home, the same home, or ``RAGMEM_HOME``/``RAGMEM_PROJECT`` already chosen by the user)."""
    if config is None or os.environ.get("RAGMEM_PROJECT") or os.environ.get("RAGMEM_HOME"):
        return None
    path = Path(config).expanduser()
    if not path.is_file():
        return None
    root = marked_root(path.parent)
    if root is None or root == project_root():
        return None
    os.environ["RAGMEM_PROJECT"] = str(root)
    return root


def ragmem_home() -> Path:
    """``$RAGMEM_HOME``, default ``.ragmem`` in the project's home (:func:`project_root`)."""
    given = os.environ.get("RAGMEM_HOME")
    return Path(given).resolve() if given else project_root() / ".ragmem"


def data_cache() -> Path:
    """Where fetched datasets are kept: ``$RAGMEM_HOME/data`` (:mod:`ragmem.data.published`)."""
    return ragmem_home() / "data"


def in_home(path: str | Path, root: Path | None = None) -> Path:
    """A relative path read relative to the home (``root``, default :func:`project_root`); an
    absolute one as it is."""
    path = Path(path).expanduser()
    return path if path.is_absolute() else (root or project_root()) / path


def tracking_uri(given: str | None = None, root: Path | None = None) -> str:
    """The store a run writes to or a command reads: ``given`` (``tracking.uri``, ``--tracking-uri``),
    else ``MLFLOW_TRACKING_URI``, else the home's ``mlruns/mlflow.db``; a relative SQLite path is
    made absolute against the home (:func:`in_home`; ``root``: that home instead of the one found)."""
    uri = given or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
    if uri.startswith(_SQLITE) and not uri.startswith(_SQLITE + "/") and ":memory:" not in uri:
        path, sep, query = uri[len(_SQLITE):].partition("?")
        return f"{_SQLITE}{in_home(path, root)}{sep}{query}"
    return uri


def artifact_root(given: str | None = None) -> str:
    """Where new experiments keep their artifacts: a URI as it is, a path made absolute against the home."""
    root = given or DEFAULT_ARTIFACT_ROOT
    if "://" in root:
        return root
    return str(in_home(root))


@contextlib.contextmanager
def file_lock(path: str | Path, wait_s: float = 180.0, what: str = "") -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if need be) for the block: what makes creating the
    MLflow store and starting the Prefect server safe when several ragmem processes start at once on
    one project (the loser waits for the winner, then finds its store or server). Waits up to
    ``wait_s`` seconds, then raises ``TimeoutError`` naming ``what``; a platform without ``fcntl``
    locks nothing (Windows: one process at a time is the user's to keep)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover (not on POSIX)
        yield
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{what or path}: another ragmem process held {path} for more than "
                                       f"{wait_s:.0f} s") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
