"""Where the Prefect API lives for a run, so that no user has to set Prefect up.

Prefect's "ephemeral" mode (no API URL) starts a temporary server inside every process; measured on
these machines it loses task-run records (0-243 of 200-800 recorded) and prints
``task_run_recorder ... CancelledError`` tracebacks at exit. Against a standing server every record
arrived and the output stayed clean. So ragmem never uses ephemeral mode:

1. ``PREFECT_API_URL`` set (environment or the active Prefect profile): report to that server.
2. Otherwise this home's *managed local server* (:mod:`ragmem.orchestration.server`), started when none
   answers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from typing import Any, Callable, Iterator

from ragmem import exits
from ragmem.clients.endpoints import EndpointDown
from ragmem.config import secrets as masking
from ragmem.errors import RagmemError
from ragmem.orchestration.server import DEFAULT_IDLE_S, healthy, QUIET_ENV, resolve_api_url


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
    names: set[str] = {cls.__name__}
    subclasses: list[type] = cls.__subclasses__()
    for sub in subclasses:
        names |= _user_error_names(sub)
    return names


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
                                              "prefect.task_engine", "prefect.engine")]
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


LOST_API_GRACE_S = 20.0  # after the work is done, how long the API is watched while the flow reports to it
LOST_API_MISSES = 3  # health checks in a row that get no answer (within 5 s, one a second): the API is gone


def run_flow(target: str, config: dict[str, Any], finish: Callable[[dict[str, Any]], None], quiet: bool = True,
             log: Callable[..., None] = print, **kwargs: Any) -> None:
    """Run a flow (``module:function``) against the resolved Prefect API (see ragmem.orchestration.prefect_api)
    and hand its result to ``finish`` (print, write the JSON).

    When the Prefect API dies during the run, the work still completes (tasks run here, results go
    to MLflow) but Prefect would retry reporting the flow's end for minutes and then drain its
    events at exit for minutes more. So once the flow announced its result
    (:func:`ragmem.orchestration.prefect_api.work_done`), the API's health is checked every second until the
    flow returns: after ``LOST_API_MISSES`` checks in a row without an answer (a stopped server
    refuses at once: about 3 s), the result is finished here, one warning line is printed and the
    process exits (Prefect's undelivered records are dropped). An API that answers is watched for
    ``LOST_API_GRACE_S``; after that the flow is left to return in its own time.
    """
    import importlib

    idle_s = (config.get("orchestration") or {}).get("server_idle_s", DEFAULT_IDLE_S)
    api_url = resolve_api_url(log=log, idle_s=idle_s)
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
        deadline, misses = time.monotonic() + LOST_API_GRACE_S, 0
        while misses < LOST_API_MISSES:
            if returned.wait(1.0):
                return
            misses = 0 if healthy(api_url, timeout=5.0) else misses + 1
            if misses == 0 and time.monotonic() > deadline:
                return  # the API answers: the flow is only slow to report, and returns on its own
        with finishing:
            if not returned.is_set():
                finish_without_prefect(OUTCOME.value)

    threading.Thread(target=watchdog, name="ragmem-prefect-watchdog", daemon=True).start()
    try:
        with prefect_context(api_url, quiet=quiet):
            # secrets stay out of the Prefect database: the flow gets them back (ragmem.config.secrets)
            result = getattr(importlib.import_module(module), name)(masking.protect(config), **kwargs)
    except Exception:
        if OUTCOME.value is not None and not healthy(api_url, timeout=2.0):
            with finishing:
                finish_without_prefect(OUTCOME.value)
        raise
    with finishing:
        returned.set()
    finish(result)
