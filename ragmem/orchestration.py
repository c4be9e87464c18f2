"""Where the Prefect API lives for a run, so that no user has to set Prefect up.

Prefect's "ephemeral" mode (no API URL) starts a temporary server inside every process; measured on
these machines it loses task-run records (0-243 of 200-800 recorded) and prints
``task_run_recorder ... CancelledError`` tracebacks at exit. Against a standing server every record
arrived and the output stayed clean. So ragmem never uses ephemeral mode:

1. ``PREFECT_API_URL`` set (environment or the active Prefect profile): report to that server.
2. Otherwise a *managed local server*: reuse the one answering on ``127.0.0.1:$RAGMEM_PREFECT_PORT``
   (default 4200), or start ``prefect server start --host 127.0.0.1`` in the background with its
   database under ``$RAGMEM_HOME/prefect`` (default ``.ragmem/prefect`` in the working directory).
   The first start takes 10-25 s (database migrations); it keeps running so later runs start at
   once. ``ragmem server status`` shows it, ``ragmem server stop`` stops it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ragmem import exits, masking
from ragmem.endpoints import EndpointDown
from ragmem.errors import RagmemError
from ragmem.journal import ragmem_home

DEFAULT_PORT = 4200
START_TIMEOUT_S = 120.0
QUIET_ENV = {"DO_NOT_TRACK": "true", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}




class FlowOutcome:
    """What a flow announced as its result before returning to Prefect (see :func:`work_done`)."""

    def __init__(self):
        self.done = threading.Event()
        self.value: Any = None

    def reset(self) -> None:
        self.done.clear()
        self.value = None


OUTCOME = FlowOutcome()


def work_done(value: Any) -> None:
    """Called by a flow with its result just before it returns: from here on the work is complete
    whatever happens to the Prefect API (the CLI finishes without it when it is gone)."""
    OUTCOME.value = value
    OUTCOME.done.set()


def managed_port() -> int:
    return int(os.environ.get("RAGMEM_PREFECT_PORT", DEFAULT_PORT))


def healthy(api_url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def configured_api_url() -> str | None:
    """PREFECT_API_URL from the environment or the active Prefect profile, if any."""
    if os.environ.get("PREFECT_API_URL"):
        return os.environ["PREFECT_API_URL"]
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return str(url) if url else None


@dataclass
class ManagedServer:
    api_url: str
    pid: int | None
    started: bool


def _pid_file() -> Path:
    return ragmem_home() / "prefect-server.pid"


def process_identity(pid: int) -> str | None:
    """What tells process ``pid`` apart from a later process given the same number: its start time
    (``/proc/PID/stat`` field 22 on Linux, ``ps -o lstart=`` elsewhere); ``None`` when no such process
    runs. (Not the command line: right after a start it can still be empty.)"""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None  # Linux, and the process is gone
    except (OSError, IndexError):
        return None
    done = subprocess.run(["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True)
    return done.stdout.strip() or None


def process_command(pid: int) -> str:
    """The command line of process ``pid`` ("" when unknown)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        done = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True)
        return done.stdout.strip()


def _read_pid_file() -> tuple[int, str | None] | None:
    """(pid, start time recorded at start) from the pid file; None when there is none or it is unreadable."""
    try:
        text = _pid_file().read_text().strip()
        record = json.loads(text) if text.startswith("{") else {"pid": int(text), "identity": None}
        return int(record["pid"]), record.get("identity")
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _server_pid() -> int | None:
    """The pid of the Prefect server this home started, when that very process still runs (same
    start time); a stale pid file (the server gone, its number reused by another process) is removed."""
    record = _read_pid_file()
    if record is None:
        return None
    pid, recorded = record
    now = process_identity(pid)
    if recorded:
        same = now is not None and now == recorded
    else:  # an old pid file (a bare number): only a process that is a Prefect server
        command = process_command(pid) if now is not None else ""
        same = "prefect" in command and "server" in command
    if not same:
        _pid_file().unlink(missing_ok=True)
        return None
    return pid


def server_owner(port: int) -> dict[str, Any] | None:
    """Who runs the Prefect server on ``port``: its pid, the ragmem home it was started with (from
    its ``PREFECT_HOME``) and its working directory (the checkout it was started from); ``None`` when
    no ``prefect server start ... --port PORT`` process is found (or not on Linux)."""
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv]
        if "server" not in words or "start" not in words or not any("prefect" in w for w in words):
            continue
        if "--port" not in words or words[words.index("--port") + 1:][:1] != [str(port)]:
            continue
        try:
            env = dict(v.split("=", 1) for v in (entry / "environ").read_text(errors="replace").split("\0") if "=" in v)
            cwd = os.readlink(entry / "cwd")
        except OSError:
            env, cwd = {}, None
        home = env.get("PREFECT_HOME")
        return {"pid": int(entry.name), "home": str(Path(home).parent) if home else None, "cwd": cwd}
    return None


def ensure_managed_server(port: int | None = None, log=print) -> ManagedServer:
    """Reuse or start the local Prefect server on 127.0.0.1 and wait until it answers."""
    port = port or managed_port()
    api_url = f"http://127.0.0.1:{port}/api"
    if healthy(api_url):
        return ManagedServer(api_url, _server_pid(), started=False)
    home = ragmem_home()
    (home / "prefect").mkdir(parents=True, exist_ok=True)
    log_path = home / "prefect-server.log"
    env = {**os.environ, **QUIET_ENV, "PREFECT_HOME": str(home / "prefect")}
    env.pop("PREFECT_API_URL", None)
    log(f"starting a local Prefect server on 127.0.0.1:{port} (first start takes ~20 s; log: {log_path})")
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True)
    _pid_file().write_text(json.dumps({"pid": proc.pid, "identity": process_identity(proc.pid)}))
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if healthy(api_url, timeout=1.0):
            return ManagedServer(api_url, proc.pid, started=True)
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            raise RagmemError(f"the local Prefect server exited with code {proc.returncode}: {tail[0]} "
                              f"(see {log_path}; is port {port} taken? set RAGMEM_PREFECT_PORT)")
        time.sleep(0.5)
    proc.terminate()
    raise RagmemError(f"the local Prefect server did not answer within {START_TIMEOUT_S:.0f} s (see {log_path})")


def stop_managed_server() -> bool:
    """Stop the server this project started; False when none was running. The pid file is checked
    against the process it names (its start time) before any signal: a stale file is removed and
    nothing is signalled."""
    pid = _server_pid()
    if pid is None:
        return False
    _pid_file().unlink(missing_ok=True)
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    return True


def resolve_api_url(log=print) -> str:
    """The API URL a flow run should report to (see the module docstring)."""
    return configured_api_url() or ensure_managed_server(log=log).api_url


class _DropUserErrors(logging.Filter):
    """Prefect logs a failed task/flow with its traceback; for a user mistake (a RagmemError) the
    CLI prints one ``error:`` line instead, so those records are dropped. So are the "Crash
    detected! ... aborted by an interrupt signal" records of a Ctrl+C or SIGTERM: the CLI prints
    one ``interrupted: ...`` line with the resume command (the Prefect runs are still marked
    Crashed on the server)."""

    # a failed task or flow: ragmem reports it itself (a sweep child's reason, the CLI's one line, the
    # traceback of an internal error in last-error.log); Prefect's copy is kept only with -v
    FAILED = ("Task run failed with exception", "Finished in state Failed", "Encountered exception during execution")

    def __init__(self, quiet: bool = True):
        super().__init__()
        self.quiet = quiet

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, (RagmemError, KeyboardInterrupt)):
            return False
        message = record.getMessage()
        if self.quiet and any(m in message for m in self.FAILED):
            return False
        return not any(name in message for name in (*_user_error_names(RagmemError),
                                                     "aborted by an interrupt signal",
                                                     "aborted by a termination signal"))


def _user_error_names(cls: type) -> set[str]:
    """The names of ``cls`` and its subclasses (ConfigError, DataError, EndpointDown, ...)."""
    return {cls.__name__}.union(*(_user_error_names(sub) for sub in cls.__subclasses__()))


class _LostApi(logging.Filter):
    """Prefect reports every event it cannot deliver to a dead API (an ERROR with the whole event,
    every ~7 s) and every retried request: once the API is gone, one warning line instead."""

    NOISE = ("Unable to connect to", "failed to process item", "Encountered retryable exception during request",
             "Connect call failed", "ConnectError", "Connection refused")

    def __init__(self, api_url: str):
        super().__init__()
        self.api_url, self.warned = api_url, False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not any(noise in message for noise in self.NOISE):
            return True
        if not self.warned:
            self.warned = True
            logging.getLogger("ragmem").warning(
                "the Prefect API at %s is not answering; the run goes on (its Prefect record will be incomplete)",
                self.api_url)
        return False


@contextlib.contextmanager
def prefect_context(api_url: str, quiet: bool = True) -> Iterator[None]:
    """Settings for flow runs started from this process: the API URL, no per-flow heartbeat thread
    (≈1 s per flow run), no telemetry, and (``quiet``) Prefect's own logs at WARNING."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        PREFECT_LOGGING_LEVEL,
        temporary_settings,
    )

    updates = {PREFECT_API_URL: api_url, PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}
    if quiet:
        updates[PREFECT_LOGGING_LEVEL] = "WARNING"
        # a Dask LocalCluster (orchestration.task_runner: dask), which reads its logging config from
        # the environment: errors only (a nanny killing a busy worker as an interrupted run's
        # cluster closes is a warning, and no news to the user who pressed Ctrl+C)
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
    drop = _DropUserErrors(quiet)
    # Prefect's run loggers create their records on these loggers, so a logger-level filter sees
    # them whether or not Prefect has attached its handlers yet.
    loggers = [logging.getLogger(n) for n in ("prefect.flow_runs", "prefect.task_runs", "prefect.flow_engine",
                                              "prefect.task_engine")]
    with temporary_settings(updates=updates):
        previous = [lg.level for lg in loggers]
        for logger in loggers:
            logger.addFilter(drop)
            if quiet:
                logger.setLevel(logging.WARNING)
        lost = _LostApi(api_url)
        watched = [logging.getLogger(n) for n in ("prefect.events.clients", "prefect._internal.concurrency",
                                                  "prefect.client", "prefect.flow_engine", "prefect.task_engine")]
        for logger in watched:
            logger.addFilter(lost)
        try:
            yield
        finally:
            if healthy(api_url, timeout=2.0):  # a dead API would hold each queued item for ~7 s
                _drain_prefect_workers()
            for logger in watched:
                logger.removeFilter(lost)
            for logger, level in zip(loggers, previous):
                logger.removeFilter(drop)
                logger.setLevel(level)


def _drain_prefect_workers(timeout: float = 30.0) -> None:
    """Deliver the queued events and logs of finished runs to the server now, while it is certain
    to be up, instead of at interpreter exit. Their workers log "Still processing items: N items
    remaining..." whenever a drain starts with a non-empty queue; that is progress, not a problem,
    so it is kept below the user's terminal (the items are still delivered: we wait for them)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for name in ("EventsWorker", "APILogWorker"):
        logging.getLogger(name).setLevel(logging.ERROR)
    for worker in (APILogWorker, EventsWorker):
        with contextlib.suppress(Exception):
            worker.drain_all(timeout=timeout)


LOST_API_GRACE_S = 20.0  # after the work is done, how long a flow may take to report to a Prefect API that is gone


def run_flow(target: str, config: dict[str, Any], finish: Callable[[dict[str, Any]], None], quiet: bool = True,
             log: Callable[..., None] = print, **kwargs: Any) -> None:
    """Run a flow (``module:function``) against the resolved Prefect API (see ragmem.orchestration)
    and hand its result to ``finish`` (print, write the JSON).

    When the Prefect API dies during the run, the work still completes (tasks run here, results go
    to MLflow) but Prefect would retry reporting the flow's end for minutes and then drain its
    events at exit for minutes more. So once the flow announced its result
    (:func:`ragmem.orchestration.work_done`), the command waits at most ``LOST_API_GRACE_S`` for
    the flow to return; if it has not and the API does not answer, the result is finished here,
    one warning line is printed and the process exits (Prefect's undelivered records are dropped).
    """
    import importlib

    api_url = resolve_api_url(log=log)
    if not healthy(api_url, timeout=5.0):  # a configured PREFECT_API_URL that does not answer

        raise EndpointDown(f"PREFECT_API_URL {api_url}: no answer from {api_url.rstrip('/')}/health within 5 s; "
                           f"nothing was run (unset PREFECT_API_URL to use ragmem's local server)")
    log(f"Prefect API: {api_url}")
    module, _, name = target.partition(":")
    OUTCOME.reset()
    returned = threading.Event()
    finishing = threading.Lock()

    def finish_without_prefect(result: dict[str, Any]) -> None:
        print(f"warning: the Prefect API at {api_url} stopped answering during the run; the results are "
              f"complete (MLflow has them) but Prefect's record of this flow run is not", file=sys.stderr)
        code = 0
        try:
            finish(result)
        except Exception as exc:  # the command's one line and code, as ragmem.exits words every ending
            code = exits.finish(exc, sys.argv[1:])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # not sys.exit: Prefect's exit-time drain would retry the dead API for minutes

    def watchdog() -> None:
        OUTCOME.done.wait()
        if returned.wait(LOST_API_GRACE_S) or healthy(api_url, timeout=2.0):
            return
        with finishing:
            if not returned.is_set():
                finish_without_prefect(OUTCOME.value)

    threading.Thread(target=watchdog, name="ragmem-prefect-watchdog", daemon=True).start()
    try:
        with prefect_context(api_url, quiet=quiet):
            # secrets stay out of the Prefect database: the flow gets them back (ragmem.masking)
            result = getattr(importlib.import_module(module), name)(masking.protect(config), **kwargs)
    except Exception:
        if OUTCOME.value is not None and not healthy(api_url, timeout=2.0):
            with finishing:
                finish_without_prefect(OUTCOME.value)
        raise
    with finishing:
        returned.set()
    finish(result)
