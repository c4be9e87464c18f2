"""A run's lifecycle (:func:`tracked_run`, :func:`end_unfinished`: no other code sets a status) and
idempotent logging of results (:func:`log_results`)."""

from __future__ import annotations

import collections
import contextlib
import logging
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from ragmem.metrics.catalogue import metric_key, metric_name  # noqa: F401  (read from here too)
from ragmem.runtime import interrupts
from ragmem.tracking.store import _ERROR_TAG_LIMIT, Tracker


@dataclass
class TrackedRun:
    """What :func:`tracked_run` yields: the run id (``None`` when tracking is off) and its tracker."""

    id: str | None
    tracker: Tracker | None

    def opened(self) -> tuple[Tracker, str]:
        """The tracker and the run id of a tracked run (the caller has checked ``id is not None``)."""
        if self.tracker is None or self.id is None:
            raise RuntimeError("an untracked run has nothing to log to")  # (a caller's mistake, not a user's)
        return self.tracker, self.id

    def logged(self, step: str) -> str | None:
        """What :meth:`mark` recorded for ``step`` on this run, or ``None`` when it was not done
        yet: a retried logging step skips what it already wrote (traces, metrics)."""
        tracker, run_id = self.opened()
        return tracker.tags(run_id).get(f"ragmem.logged.{step}")

    def mark(self, step: str, value: str) -> None:
        tracker, run_id = self.opened()
        tracker.set_tags(run_id, {f"ragmem.logged.{step}": value})


@contextlib.contextmanager
def _sigterm_as_exception() -> Iterator[None]:
    """In the main thread, SIGTERM raises :class:`ragmem.errors.Terminated` for the block (so the run is marked
    KILLED and the block's cleanup runs); the previous handler is put back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        previous = signal.signal(signal.SIGTERM, interrupts.raise_terminated)
    except ValueError:  # not allowed here (an embedded interpreter)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def tracked_run(tracker: Tracker | None, experiment: str, run_name: str | None = None, *,
                tags: dict[str, str] | None = None, parent_run_id: str | None = None,
                run_id: str | None = None) -> Iterator[TrackedRun]:
    """Open (or, with ``run_id``, adopt) an MLflow run for the block and end it with its status:

    - the block ends: FINISHED;
    - the block raises: FAILED, with the tag ``ragmem.error`` = ``Type: message``; re-raised;
    - Ctrl+C (KeyboardInterrupt) or SIGTERM: KILLED; re-raised.

    With ``tracker=None`` (tracking off) it yields ``TrackedRun(None, None)`` and records nothing.
    """
    if tracker is None:
        yield TrackedRun(None, None)
        return
    run_id = run_id or tracker.create_run(experiment, run_name, tags=tags, parent_run_id=parent_run_id)
    run = TrackedRun(run_id, tracker)
    try:
        with _sigterm_as_exception():
            yield run
    except KeyboardInterrupt as exc:  # Terminated (SIGTERM) is a KeyboardInterrupt too
        _end(tracker, run_id, "KILLED", exc)
        raise
    except BaseException as exc:  # an interrupt a library turned into an error of its own is still KILLED
        _end(tracker, run_id, "KILLED" if interrupts.interrupt_in(exc) else "FAILED", exc)
        raise
    tracker._terminate(run_id, "FINISHED")


def _end(tracker: Tracker, run_id: str, status: str, exc: BaseException | str) -> None:
    reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    # MLflow's SQL store logs a caught database error with its traceback before raising it (a Ctrl+C
    # in the middle of a write leaves SQLite locked: "database is locked"); ending the run is handled
    # here, so that log is muted while it is tried
    with store_errors_muted():
        try:
            tracker.set_tags(run_id, {"ragmem.error": reason[:_ERROR_TAG_LIMIT]})
            tracker._terminate(run_id, status)
        except Exception:  # the store itself failed: the original error is what the user must see (the run
            pass           # stays RUNNING, shown DEAD once its process is gone: resumable)


class _Muted(logging.Filter):
    """Drops the records of the threads inside :func:`store_errors_muted`, and only theirs: a sweep's
    children log and end their runs on threads of one process, and a flag of the logger's own (saved
    and restored by each) was left set when two of them overlapped out of order, muting every later
    store error of the process."""

    def __init__(self) -> None:
        super().__init__()
        self.depth: collections.Counter[int] = collections.Counter()  # thread ident -> blocks entered
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.depth.get(threading.get_ident())  # (a filter runs on the thread that logs)


_MUTED = _Muted()


@contextlib.contextmanager
def store_errors_muted() -> Iterator[None]:
    """MLflow's SQL store logs a database error with its traceback before it raises it (a full disk:
    ``database or disk is full`` while a run's metrics are written); ragmem reports the error it
    raises (one line: :mod:`ragmem.runtime.space`), so that log is muted for the block, on this thread."""
    logging.getLogger("mlflow.store.db.utils").addFilter(_MUTED)  # (once: a filter is added only once)
    me = threading.get_ident()
    with _MUTED.lock:
        _MUTED.depth[me] += 1
    try:
        yield
    finally:
        with _MUTED.lock:
            _MUTED.depth[me] -= 1
            if not _MUTED.depth[me]:
                del _MUTED.depth[me]


def end_unfinished(tracker: Tracker | None, run_ids, status: str, reason: str) -> None:
    """End the runs created beforehand that are still RUNNING (sweep children): FAILED when a
    child's task died before its own :func:`tracked_run` could end it, KILLED when the sweep was
    interrupted while they ran. Runs already ended keep their status."""
    if tracker is None:
        return
    for run_id in run_ids:
        try:
            running = tracker.client.get_run(run_id).info.status == "RUNNING"
        except Exception:  # the store itself failed: nothing more can be recorded
            return
        if running:
            _end(tracker, run_id, status, reason)


def log_results(run: TrackedRun, *, params: dict[str, Any] | None = None,
                metrics: dict[str, float | None] | None = None, tags: dict[str, str] | None = None,
                json_files: dict[str, Any] | None = None, tables: dict[str, pd.DataFrame] | None = None,
                figures: dict[str, Any] | None = None, files: tuple[Path, ...] = (),
                texts: dict[str, str] | None = None) -> None:
    """Log results on a run (metrics named by :func:`metric_key`), idempotently: params and tags are set (the same value again is a
    no-op), a metric the run already holds with the same value is not logged again (a retried step
    adds no second history entry), artifacts of the same name are replaced. Nothing happens when
    tracking is off."""
    if run.id is None:
        return
    tracker, run_id = run.opened()
    if params:
        tracker.log_params(run_id, params)
    if tags:
        tracker.set_tags(run_id, tags)
    if metrics:  # a value the run already holds is not logged again (no second history entry)
        metrics = {metric_key(k): v for k, v in metrics.items()}
        held = tracker.client.get_run(run_id).data.metrics
        tracker.log_metrics(run_id, {k: v for k, v in metrics.items() if v is None or held.get(k) != float(v)})
    for name, payload in (json_files or {}).items():
        tracker.log_json(run_id, payload, name)
    for name, table in (tables or {}).items():
        tracker.log_table(run_id, table, name)
    for name, text in (texts or {}).items():
        tracker.log_text(run_id, text, name)
    for name, figure in (figures or {}).items():
        tracker.log_figure(run_id, figure, name)
    for path in files:
        if Path(path).is_file():
            tracker.log_file(run_id, path)
