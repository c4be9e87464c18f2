"""What the ``ragmem`` commands share (:mod:`ragmem.cli.app`, :mod:`ragmem.cli.services`): logging to
stderr, the ``--output`` check, the client of the store a command reads, writing a JSON result, and
running a flow on a prepared run (:func:`run_prepared`). The commands' own bodies live beside them."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from ragmem.clients.endpoints import check_store
from ragmem.config.secrets import ScrubFilter
from ragmem.errors import RagmemError
from ragmem.orchestration.prefect_api import run_flow as start
from ragmem.report.terminal import out
from ragmem.run import prepare
from ragmem.run.summary import write_json
from ragmem.runtime import home, space
from ragmem.tracking import Tracker

log = logging.getLogger("ragmem")


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (a test's capture, a redirected stream)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def setup_logging(verbose: bool) -> None:
    if not any(isinstance(h, _Stderr) for h in log.handlers):
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("ragmem | %(message)s"))
        handler.addFilter(ScrubFilter())  # a URL's password and secret query parameters never printed
        log.addHandler(handler)
    log.setLevel(logging.DEBUG if verbose else logging.INFO)
    log.propagate = False
    # MLflow announces creating and migrating its sqlite tables at INFO on first use: not news to a
    # user of the command line (the library itself leaves logger levels alone)
    for name in ("mlflow.store.db.utils", "alembic", "mlflow.tracing.export.async_export_queue"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # ... nor urllib3's WARNING per retried request to a tracking server (the outcome is reported)
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    # ... nor SQLAlchemy's pool, which logs "Error closing cursor" with a traceback when Ctrl+C or
    # SIGTERM interrupts a read of the MLflow store (the interrupt is the command's one line)
    logging.getLogger("sqlalchemy.pool").setLevel(logging.CRITICAL)


def in_config_home(config: Path | None) -> None:
    """A config file that lies in another home than the working directory's: the command runs in
    that home (its store, its ``.ragmem``), said in one line (:func:`ragmem.runtime.home.enter_config_home`)."""
    entered = home.enter_config_home(config)
    if entered is not None:
        log.info(f"home: {entered} (the config's; runs are stored there)")


def run_prepared(target: str, ready: prepare.Prepared, verbose: bool, finish: Callable[[dict[str, Any]], None],
             **kwargs: Any) -> None:
    """Run a flow on the prepared run ``ready`` (handed over by token: its data is not loaded again)
    and hand the flow's result to ``finish`` (see :func:`ragmem.orchestration.prefect_api.run_flow`)."""
    token = prepare.hand_over(ready)
    try:  # (an interrupt leaves the command as Stopped: ragmem.cli.app's command group makes it one)
        start(target, ready.config.raw, finish, quiet=not verbose, log=log.info, prepared=token, **kwargs)
    finally:
        prepare.drop(token)


def writable(path: Path) -> Path:
    """Check ``--output`` before any work (a result computed and then lost is the worst outcome)."""
    path = Path(path)
    if path.is_dir():
        raise RagmemError(f"--output {path}: is a folder; name a file, e.g. {path / 'summary.json'}")
    try:  # the folder is made now (it would be at the end) and a file is tried in it
        path.resolve().parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.resolve().parent, prefix=".ragmem-check-"):
            pass
        if path.exists():
            with open(path, "a", encoding="utf-8"):
                pass
    except OSError as exc:
        raise RagmemError(f"--output {path}: cannot be written ({exc.strerror or exc})") from None
    return path


def store_uri(tracking_uri: str | None) -> str:
    """The store a command reads (``--tracking-uri``, else ``MLFLOW_TRACKING_URI``, else the embedded
    default), checked: a tracking server that does not answer is one line, exit 2."""
    uri = home.tracking_uri(tracking_uri)
    check_store(uri, "--tracking-uri" if tracking_uri else "MLFLOW_TRACKING_URI" if os.environ.get("MLFLOW_TRACKING_URI")
                else "tracking.uri")
    return uri


def store_client(tracking_uri: str | None):
    """An MLflow client of the store a command reads (:func:`store_uri`)."""
    return Tracker(store_uri(tracking_uri)).client


def write(path: Path | None, payload: dict[str, Any], what: str) -> None:
    """``payload`` as JSON at ``path`` (``None``: none asked for)."""
    if path is None:
        return
    try:
        write_json(path, payload)
    except OSError as exc:  # (checked writable before the run: the disk filled, or the folder went)
        if space.disk_full(exc) is not None:
            run = payload.get("run_id")
            raise space.DiskFull(path, f"; the {what} was not written", way_out=(
                f"the run {run} is stored whole, the summary as its artifact summary.json (ragmem report {run} "
                "shows it)" if run else "free some space, then run the command again")) from None
        raise RagmemError(f"--output {path}: cannot be written ({exc.strerror or exc})") from None
    out.print(f"{what} written to {path}", markup=False, highlight=False, soft_wrap=True)  # a long path: one line


def flags_untyped(command: Any) -> Any:
    """``command`` (a click command or group, as typer builds it) with its flags shown in ``--help``
    as flags: typer shows an on/off option's value type as ``<bool>``, which reads as if it took one."""
    if getattr(command, "flags_untyped", False):
        return command
    command.flags_untyped = True
    for param in getattr(command, "params", ()):
        if getattr(param, "is_flag", False):
            param.metavar = ""
    made = command.get_help_option  # (--help is made when the help is asked for)

    def help_option(ctx, made=made):
        option = made(ctx)
        if option is not None:
            option.metavar = ""
        return option
    command.get_help_option = help_option
    for sub in getattr(command, "commands", {}).values():
        flags_untyped(sub)
    return command
