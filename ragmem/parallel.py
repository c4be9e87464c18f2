"""Where the text-heavy per-example work runs: in this process, on a local process pool, or on Dask.

Scoring a 10k-example run is CPU work in Python (tokenizing, n-gram statistics, part-of-speech
tags); threads share one interpreter lock, so only processes use more than one core. A *mapper*
applies a module-level function to chunks of items and returns the results in order:

- :class:`Serial`: in this process (small runs, tests, and inside a Dask worker);
- :class:`ProcessPool`: ``workers`` local processes (``orchestration.workers``), joblib's loky
  executor, reused by every run of the process;
- with ``orchestration.task_runner: dask``, ``ragmem.tasks.steps.PrefectMapper``: the chunks as
  Prefect tasks on prefect-dask's DaskTaskRunner (see ``flows/runners.py``).

Every mapped function is pure and its per-process caches (``generation.scorer_for``, the keyword
extractors) load jieba's dictionary once per worker, so results are identical whichever mapper ran
them, and whatever the chunking.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any, Callable, Sequence

#: below this many items a pool costs more than it saves (a worker's start, pickling)
MIN_PARALLEL_ITEMS = 2000


def chunks(items: Sequence[Any], parts: int) -> list[Sequence[Any]]:
    """``items`` cut into at most ``parts`` contiguous chunks of near-equal size."""
    if not items:
        return []
    size = math.ceil(len(items) / max(1, parts))
    return [items[i:i + size] for i in range(0, len(items), size)]


class Serial:
    """Every chunk in this process."""

    workers = 1
    name = "serial"

    def map(self, fn: Callable[..., list], items: Sequence[Any], *args: Any) -> list:
        return list(fn(items, *args)) if items else []


SERIAL = Serial()


class ProcessPool:
    """``fn(chunk, *args)`` over chunks of ``items`` on ``workers`` local processes.

    The processes are joblib's loky executor: reused across calls and runs (they stop after 5
    idle minutes), started fresh rather than forked (forking a process that runs Prefect's and
    MLflow's threads is unsafe), and, unlike ``multiprocessing``'s spawn, they never re-import
    the user's ``__main__`` (a script calling ``ragmem.evaluate`` needs no ``if __name__`` guard).
    """

    name = "processes"

    def __init__(self, workers: int):
        self.workers = workers

    def map(self, fn: Callable[..., list], items: Sequence[Any], *args: Any) -> list:
        return self.submit(fn, items, *args).result()

    def submit(self, fn: Callable[..., list], items: Sequence[Any], *args: Any) -> "Pending":
        """Start ``map(fn, items, *args)`` on the workers and return at once (small inputs: on
        ``result()``, in this process)."""
        if len(items) < MIN_PARALLEL_ITEMS:
            return Pending(lambda: SERIAL.map(fn, items, *args))
        from joblib.externals.loky import get_reusable_executor

        executor = get_reusable_executor(max_workers=self.workers, timeout=300)
        # a few chunks per worker: an uneven chunk does not leave the other workers idle
        futures = [executor.submit(fn, part, *args) for part in chunks(items, 4 * self.workers)]
        return Pending(lambda: [x for future in futures for x in future.result()])


class Pending:
    """A map started by :meth:`ProcessPool.submit`: ``result()`` waits for it, in order."""

    def __init__(self, collect: Callable[[], list]):
        self._collect = collect

    def result(self) -> list:
        return self._collect()


def local_workers(setting: int | str) -> int:
    """``orchestration.workers``: a number, or ``auto`` (the cores this process may use)."""
    if setting == "auto":
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not Linux
            return max(1, os.cpu_count() or 1)
    return int(setting)


def on_dask_worker() -> bool:
    """Whether this code runs in a Dask worker (a sweep child on Dask): its cores are Dask's."""
    if "distributed" not in sys.modules:
        return False
    from distributed import get_worker

    try:
        get_worker()
    except ValueError:
        return False
    return True


def mapper_for(workers: int | str) -> Serial | ProcessPool:
    """The local mapper of ``orchestration.workers`` (in this process on a Dask worker)."""
    count = local_workers(workers)
    return SERIAL if count <= 1 or on_dask_worker() else ProcessPool(count)
