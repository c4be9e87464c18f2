"""Progress of the long stages, so that nothing is silent for more than 10 s.

A stage (agent calls, judging, an LLM metric, embeddings, the bootstrap, logging) is opened with
:func:`stage` and advanced as items finish. One daemon thread watches the open stages:

- on a terminal (stderr is a TTY, and ``RAGMEM_PROGRESS`` is not ``log``): a rich progress bar per
  stage, with done/total, rate, ETA and failures so far;
- otherwise (CI logs, ``serve``, a file): a log line on the ``ragmem`` logger every ``interval``
  seconds (``RAGMEM_PROGRESS_INTERVAL``, default 10) per stage still running, e.g.
  ``judge: 120/300 (40%), 12.3/s, ETA 15 s, 2 failed``, and one closing line for a stage that
  lasted longer than the interval. A stage shorter than the interval prints nothing.

``RAGMEM_PROGRESS=off`` silences it (the tests' default is the log mode).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from typing import Iterator

from ragmem.runtime import interrupts

log = logging.getLogger("ragmem")


def _interval() -> float:
    try:
        return max(0.2, float(os.environ.get("RAGMEM_PROGRESS_INTERVAL", "10")))
    except ValueError:
        return 10.0


def _mode() -> str:
    mode = os.environ.get("RAGMEM_PROGRESS", "auto")
    if mode in ("off", "log", "bar"):
        return mode
    return "bar" if sys.stderr.isatty() else "log"


def _seconds(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


class Stage:
    """One stage's counts (thread-safe)."""

    def __init__(self, name: str, total: int | None, unit: str = ""):
        self.name, self.total, self.unit = name, total, unit
        self.done = self.failed = 0
        self.started = time.monotonic()
        self.logged = self.last = self.started
        self.said = ""  # the last line logged
        self._lock = threading.Lock()
        self.task_id = None  # the rich task, in bar mode

    def advance(self, n: int = 1, failed: int = 0) -> None:
        with self._lock:
            self.done += n
            self.failed += failed
            self.last = time.monotonic()

    def line(self, closing: bool = False) -> str:
        elapsed = time.monotonic() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        failed = f", {self.failed} failed" if self.failed else ""
        if closing:
            count = f"{self.done}/{self.total}" if self.total else f"{self.done} done" if self.done else "done"
            count += f" {self.unit}" if self.unit and self.total else ""
            return f"{self.name}: {count} in {_seconds(elapsed)}{failed}"
        if not self.total:
            return f"{self.name}: running for {_seconds(elapsed)}{f', {self.done} done' if self.done else ''}{failed}"
        idle = time.monotonic() - self.last
        if self.done < self.total and idle >= _interval():  # a stall is news; an ETA from the old rate is not
            eta = f", none finished for {_seconds(idle)}"
        else:
            eta = f", ETA {_seconds((self.total - self.done) / rate)}" if rate > 0 and self.done < self.total else ""
        if self.unit:  # slow items (configurations): the rate says less than the ETA
            return f"{self.name}: {self.done}/{self.total} {self.unit} ({100 * self.done / self.total:.0f}%){eta}{failed}"
        return (f"{self.name}: {self.done}/{self.total} ({100 * self.done / self.total:.0f}%), "
                f"{rate:.1f}/s{eta}{failed}")


class _Watcher:
    """The one thread that reports the open stages."""

    def __init__(self):
        self.stages: list[Stage] = []
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.bar = None

    def open(self, stage: Stage, mode: str) -> None:
        with self.lock:
            self.stages.append(stage)
            if mode == "bar":
                self._bar_add(stage)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._watch, name="ragmem-progress", daemon=True)
                self.thread.start()

    def close(self, stage: Stage, mode: str) -> None:
        with self.lock:
            if stage in self.stages:
                self.stages.remove(stage)
            if self.bar is not None and stage.task_id is not None:
                self.bar.remove_task(stage.task_id)
                if not self.stages:
                    self.bar.stop()
                    self.bar = None
        if mode == "log" and time.monotonic() - stage.started >= _interval():
            log.info("%s", stage.line(closing=True))

    def _bar_add(self, stage: Stage) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        if self.bar is None:
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[rate]}"), TimeRemainingColumn(), TextColumn("{task.fields[failed]}"),
                                console=Console(file=sys.stderr), transient=True)
            self.bar.start()
        stage.task_id = self.bar.add_task(stage.name, total=stage.total, rate="", failed="")

    def _watch(self) -> None:
        while True:
            time.sleep(0.2 if self.bar is not None else min(1.0, _interval()))  # a line every interval, to 0.2 s
            with self.lock:
                if not self.stages:
                    self.thread = None
                    return
                stages = list(self.stages)
                bar = self.bar
            now = time.monotonic()
            for stage in stages:
                if bar is not None and stage.task_id is not None:
                    elapsed = now - stage.started
                    bar.update(stage.task_id, completed=stage.done,
                               rate=f"{stage.done / elapsed:.1f}/s" if elapsed > 0 else "",
                               failed=f"{stage.failed} failed" if stage.failed else "")
                elif bar is None and now - stage.logged >= _interval() and not (stage.total and stage.done >= stage.total):
                    # (a finished stage waiting for an enclosing one to close has nothing new to say)
                    stage.logged = now
                    line = stage.line()
                    if line != stage.said:  # (an interval under a second: the same whole seconds twice)
                        stage.said = line
                        log.info("%s", line)


_WATCHER = _Watcher()


_FOLDS: list[Stage] = []  # the stages every other stage is folded into (a sweep's overall progress)


@contextlib.contextmanager
def fold(into: Stage) -> Iterator[None]:
    """For the block, every stage opened elsewhere (the sweep's children: agent, judge, metrics,
    logging) is counted but not shown: ``into`` alone shows the progress (one bar on a terminal, its
    lines in a log), and :func:`folded` tells the callers that would log a line of their own."""
    _FOLDS.append(into)
    try:
        yield
    finally:
        _FOLDS.remove(into)


def folded() -> bool:
    """A fold is open (:func:`fold`): a child's own lines would repeat for every child."""
    return bool(_FOLDS)


@contextlib.contextmanager
def stage(name: str, total: int | None = None, unit: str = "") -> Iterator[Stage]:
    """A stage for the block: ``with stage("judge", 300) as s: ... s.advance(1, failed=0)``;
    ``unit`` names the items in its lines (``sweep: 3/18 configurations (17%), ETA 40 s``)."""
    if threading.current_thread() is threading.main_thread():
        interrupts.check()  # Ctrl+C or SIGTERM received, its exception lost: no stage starts
    mode = _mode()
    current = Stage(name, total, unit)
    if mode == "off" or _FOLDS:
        yield current
        return
    _WATCHER.open(current, mode)
    try:
        yield current
    finally:
        _WATCHER.close(current, mode)
