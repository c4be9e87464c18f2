"""Where the text-heavy per-example work runs: in this process, on a local process pool, or on Dask.

Scoring a 10k-example run is CPU work in Python (tokenizing, n-gram statistics, part-of-speech
tags); threads share one interpreter lock, so only processes use more than one core. A *mapper*
applies a module-level function to chunks of items and returns the results in order:

- :class:`Serial`: in this process (small runs, tests, and inside a Dask worker);
- :class:`ProcessPool`: ``workers`` local processes (``orchestration.workers``), joblib's loky
  executor, reused by every run of the process;
- :class:`ForkPool`: the same work split between this process and ``workers - 1`` processes forked
  from it for the map, which share its memory (imports, the data, the segmenter's dictionary)
  instead of loading their own: chosen on Linux, and used whenever no thread but ragmem's own
  runs in the process (``ragmem.evaluate``); else (a Prefect flow, MLflow's threads) loky's;
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

from ragmem.runtime import forking

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


class ForkPool(ProcessPool):
    """``fn(chunk, *args)`` over parts of ``items``: some in this process, the others each in a
    process forked from it (:mod:`ragmem.runtime.forking`), at most ``workers - 1`` of them at a time.

    A forked process shares this one's pages until it writes to them, so a worker costs only what
    its part allocates (parts of :data:`PART` items: about 20 MB), against 85 MB of imports and 33 MB
    of dictionary for a fresh loky worker. A map forks only when every thread besides the calling one
    is ragmem's own (``ragmem-*``: the progress line, which a child never touches); else (a Prefect
    flow's threads, MLflow's) it goes to loky's pool.
    """

    name = "fork"

    #: items a forked child takes at most, unless the mapped function says fewer (its ``part_items``):
    #: a child's private memory is what it allocates plus the pages this process writes while it
    #: runs, so a part is sized by time. Generation scores take 0.3 s per 1,000 pairs, and such a
    #: child held up to 105 MB (keyword sets: 0.05 s, 3 to 8 MB)
    PART = 1000

    def __init__(self, workers: int):
        super().__init__(workers)
        self._begun: list[_Begun] = []  # maps submitted and not collected, oldest first

    def submit(self, fn: Callable[..., list], items: Sequence[Any], *args: Any) -> "Pending":
        """``items`` in parts of at most :data:`PART` (or ``fn.part_items``); a child is forked for
        each part but the first while fewer than ``workers - 1`` run, and for the next parts on each
        :meth:`tick`. On ``result()`` this process works through the parts left, in order, handing the
        next ones to children as slots free up (it never waits idle for a slot), then collects the children's."""
        if len(items) < MIN_PARALLEL_ITEMS:
            return Pending(lambda: SERIAL.map(fn, items, *args))
        if not forking.fork_is_safe():
            return super().submit(fn, items, *args)
        size = min(getattr(fn, "part_items", self.PART), math.ceil(len(items) / self.workers))
        begun = _Begun(fn, args, [items[i:i + size] for i in range(0, len(items), size)])
        begun.todo = list(range(1, len(begun.parts)))
        self._begun.append(begun)
        self._hand_out(begun)
        return Pending(lambda: self._collect(begun))

    def tick(self) -> None:
        """Hand the next parts of the maps begun to the children whose slots freed up: called
        between two pieces of this process's own work (:func:`ragmem.metrics.compute_metrics`
        between families), so the children do not sit idle until the maps are collected."""
        for begun in self._begun:
            if not self._hand_out(begun):
                break

    def _collect(self, begun: "_Begun") -> list:
        own: dict[int, list] = {}
        begun.todo.insert(0, 0)
        try:
            while begun.todo:
                i = begun.todo.pop(0)
                own[i] = list(begun.fn(begun.parts[i], *begun.args))
                self._hand_out(begun)
            return [x for i in range(len(begun.parts))
                    for x in (own[i] if i in own else forking.reap(begun.children[i]))]
        finally:  # a part failed (here or in a child): the other children are stopped, their files removed
            self._begun.remove(begun)
            forking.discard(begun.children.values())

    def _hand_out(self, begun: "_Begun") -> bool:
        """Fork for the parts of ``begun`` not handed out yet, in order, while a slot is free;
        whether slots are left."""
        while begun.todo:
            pid = self._fork(begun.fn, begun.parts[begun.todo[0]], begun.args)
            if pid is None:
                return False
            begun.children[begun.todo.pop(0)] = pid
        return True

    def _fork(self, fn: Callable[..., list], part: Sequence[Any], args: tuple) -> int | None:
        """A child working on ``part`` (its pid), or None when ``workers - 1`` children run, or when
        forking is no longer safe (a thread another library started since the map began, an LLM
        client's say: this process then takes the part itself)."""
        if forking.running() >= self.workers - 1 or not forking.fork_is_safe():
            return None
        return forking.fork(fn, part, args)


def stop_pool() -> None:
    """Stop the worker processes at once, without waiting for their work (an interrupt: that work is
    lost with the run). Else the exit would wait for it: loky's exit handler joins its manager
    thread, which waits for the workers, and one still starting or mid-chunk holds the exit for as
    long as it takes. Forked children (:class:`ForkPool`) are killed, waited for and their files
    removed. Nothing when no pool was started in this process."""
    forking.discard()
    module = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(module, "_executor", None)
    if executor is not None:
        try:
            executor.shutdown(wait=False, kill_workers=True)
        except Exception:  # noqa: BLE001 (a pool already broken or shut down: nothing left to stop)
            pass


class _Begun:
    """A map :class:`ForkPool` began: its parts, those not handed out yet, the children of the others."""

    def __init__(self, fn: Callable[..., list], args: tuple, parts: list):
        self.fn, self.args, self.parts = fn, args, parts
        self.todo: list[int] = []
        self.children: dict[int, int] = {}


class Pending:
    """A map started by :meth:`ProcessPool.submit`: ``result()`` waits for it (its results in order)."""

    def __init__(self, collect: Callable[[], Any]):
        self._collect = collect

    def result(self) -> Any:
        return self._collect()


class EarlyMaps:
    """Maps begun on the items of each agent batch as it comes in, so the workers score the answers
    while the agent and the judge run; the metrics' maps then take these results and map only the
    rest (:meth:`ragmem.metrics.MetricContext.map`). Every mapped function is pure and per item
    (see above), so the results are the same as one map over all the items.

    ``submit`` (what :meth:`MetricContext.start` calls) keeps the items of ``fn, *args`` not begun
    yet and starts them on ``mapper`` once :data:`MIN_PARALLEL_ITEMS` have gathered (fewer would
    not pay for the pool); items still gathering at the end are left to the metrics' own map."""

    def __init__(self, mapper: "ProcessPool"):
        self.mapper = mapper
        self._seen: dict[tuple, set] = {}
        self._gathering: dict[tuple, list] = {}
        self._begun: dict[tuple, list[tuple[list, Pending]]] = {}
        self._results: dict[tuple, dict] = {}

    def submit(self, fn: Callable[..., list], items: Sequence[Any], *args: Any) -> None:
        key = (fn, args)
        seen = self._seen.setdefault(key, set())
        gathering = self._gathering.setdefault(key, [])
        for item in items:
            if item not in seen:
                seen.add(item)
                gathering.append(item)
        if len(gathering) >= MIN_PARALLEL_ITEMS:
            self._begun.setdefault(key, []).append((gathering, self.mapper.submit(fn, gathering, *args)))
            self._gathering[key] = []

    def begun(self, fn: Callable[..., list], args: tuple) -> set:
        """The items a map of ``fn, *args`` has begun on (their results: :meth:`results`); the
        items still gathering are left out, for the metrics' own map."""
        seen = self._seen.get((fn, args), set())
        seen.difference_update(self._gathering.pop((fn, args), ()))
        return seen

    def results(self, fn: Callable[..., list], args: tuple) -> dict:
        """``{item: result}`` of every map begun for ``fn, *args`` (waits for them)."""
        key = (fn, args)
        if key not in self._results:
            self._results[key] = {item: result for part, pending in self._begun.pop(key, ())
                                  for item, result in zip(part, pending.result())}
        return self._results[key]

    def forget(self, fn: Callable[..., list], args: tuple) -> None:
        """Let go of the items and results of ``fn, *args`` (the metrics took them: they hold memory)."""
        for held in (self._seen, self._gathering, self._begun, self._results):
            held.pop((fn, args), None)

    def clear(self) -> None:
        """Forget every item and result."""
        for held in (self._seen, self._gathering, self._begun, self._results):
            held.clear()


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
    """The local mapper of ``orchestration.workers`` (in this process on a Dask worker): on Linux
    a :class:`ForkPool` (which goes to loky's pool where forking is not safe)."""
    count = local_workers(workers)
    if count <= 1 or on_dask_worker():
        return SERIAL
    return ForkPool(count) if forking.available() else ProcessPool(count)
