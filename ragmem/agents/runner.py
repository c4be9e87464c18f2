"""Timing agent calls: monotonic clock per call, bounded concurrency, per-call timeout, results in
input order, one failure recorded per example without stopping the others.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, Sequence

from ragmem.clients import calls
from ragmem.clients.endpoints import EndpointDown
from ragmem.data.fields import text_problem
from ragmem.errors import escaped_surrogates, failure_message
from ragmem.runtime import contained, interrupts, space
from ragmem.schema import AgentOutput, Context, Example


class ReplyError(ValueError):
    """The agent returned something that is not an answer."""


def _text(where: str, value: str) -> str:
    """``value``, or the reply refused when no file could hold it (a lone surrogate: UTF-8 has none;
    an HTTP agent's JSON may carry one as a ``\\u`` escape of half a pair)."""
    problem = text_problem(value)
    if problem is not None:
        raise ReplyError(f"{where}: {problem}")
    return value


def _contexts(value: Any) -> list[Context]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise ReplyError(f"contexts must be a list, got {type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, Context):
            context = item
        elif isinstance(item, str):
            context = Context(text=item)
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            score = item.get("score")
            context = Context(text=item["text"], id=None if item.get("id") is None else str(item["id"]),
                              source=item.get("source"), score=None if score is None else float(score))
        else:
            raise ReplyError(f"contexts[{i}] must be a string or an object with 'text'")
        for field in ("text", "id", "source"):
            if isinstance(getattr(context, field), str):
                _text(f"contexts[{i}].{field}", getattr(context, field))
        out.append(context)
    return out


def _timings(value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ReplyError(f"timings must be an object of stage -> seconds, got {type(value).__name__}")
    try:
        timings = {str(k): float(v) for k, v in value.items()}
    except (TypeError, ValueError):
        raise ReplyError("timings values must be numbers (seconds)") from None
    for stage in timings:
        _text(f"timings stage {escaped_surrogates(stage)!r}", stage)
    return timings


def parse_reply(raw: Any) -> tuple[str, list[Context], dict[str, float]]:
    """Accept a string, a dict, an object with attributes or a tuple; see :mod:`ragmem.agents`."""
    if isinstance(raw, str):
        return _text("answer", raw), [], {}
    if isinstance(raw, tuple):
        if not 2 <= len(raw) <= 3:
            raise ReplyError("a tuple reply must be (answer, contexts) or (answer, contexts, timings)")
        answer, contexts, timings = (*raw, None) if len(raw) == 2 else raw
    elif isinstance(raw, dict):
        answer, contexts, timings = raw.get("answer"), raw.get("contexts"), raw.get("timings")
    elif hasattr(raw, "answer"):
        answer = raw.answer
        contexts, timings = getattr(raw, "contexts", None), getattr(raw, "timings", None)
    else:
        raise ReplyError(f"expected a string, dict, tuple or object with 'answer', got {type(raw).__name__}")
    if not isinstance(answer, str):
        raise ReplyError(f"answer must be a string, got {type(answer).__name__}")
    return _text("answer", answer), _contexts(contexts), _timings(timings)


def _timed_call(agent: Callable[[Example], Any], example: Example, starts: dict[int, float],
                index: int, retries: int, backoff_s: float) -> tuple[Any, BaseException | None, float, int, int]:
    """Call under the one call policy (:mod:`ragmem.clients.calls`: what is retried, the backoff, the
    endpoint's breaker); the latency is that of the last attempt, timed with the monotonic clock.
    An endpoint's agent (http) retries what :func:`ragmem.clients.calls.transient` says, a timeout once; an
    in-process agent what its ``retryable`` says, ``retries`` times whatever it raised."""
    breaker = getattr(agent, "breaker", None)  # an endpoint's agent (http): see ragmem.clients.endpoints
    if breaker is not None:
        attempts = calls.Attempts(calls.Policy(retries, backoff_s), breaker)
    else:
        policy = calls.Policy(retries, backoff_s, timeout_retries=retries)
        attempts = calls.Attempts(policy, None, getattr(agent, "retryable", lambda exc: False))
    while True:
        wall = time.time_ns()
        try:
            attempts.start()
        except EndpointDown as down:  # the endpoint is down: no call (the run is stopping)
            return None, down, 0.0, wall, attempts.count + 1
        start = time.perf_counter()
        starts[index] = start
        try:  # (sys.exit or os._exit in the user's agent: that example's failure, never the process's end)
            raw = contained.called(agent, example)
        except Exception as exc:  # any failure of the user's agent is recorded for that example
            elapsed = time.perf_counter() - start
            try:
                wait = attempts.failed(exc)
            except EndpointDown:  # this failure opened the breaker
                return None, exc, elapsed, wall, attempts.count
            if wait is None:
                return None, exc, elapsed, wall, attempts.count
        else:
            attempts.succeeded()
            return raw, None, time.perf_counter() - start, wall, attempts.count
        starts.pop(index, None)  # backing off: not "running" for the timeout watch
        time.sleep(wait)


class _Raised:
    """What a worker raised outside the agent's call (keeping its output: the journal), for the run's
    thread to raise: a worker that died with it left the run waiting for ever for its example."""

    def __init__(self, exc: BaseException):
        self.exc = exc


class _Workers:
    """``concurrency`` daemon threads calling the agent; a call past its timeout is abandoned and a
    fresh worker takes its place.

    Daemon threads, not ``ThreadPoolExecutor``: the executor's threads are joined at interpreter
    exit, so one agent call stuck for ever kept the process alive for ever after the run had ended
    (measured: a 150 s call held the exit for 150 s). A daemon thread is dropped at exit. A
    subprocess per call would let a stuck call be killed, but costs a process start per example and
    cannot share the user's in-process agent (a loaded model, an open client)."""

    def __init__(self, call: Callable[[int], Any], concurrency: int):
        self.call = call
        self.todo: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self.done: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()  # (index, (result, output) or _Raised)
        self.stopped = threading.Event()
        self.abandoned: set[int] = set()  # timed-out calls: their worker leaves when they return
        for _ in range(max(1, concurrency)):
            self.add_worker()

    def add_worker(self) -> None:
        threading.Thread(target=self._work, name="ragmem-agent", daemon=True).start()

    def _work(self) -> None:
        while not self.stopped.is_set():
            index = self.todo.get()
            if index is None or self.stopped.is_set():
                return
            try:
                self.done.put((index, self.call(index)))
            except BaseException as exc:  # (keeping the output failed: the run must hear it, not wait for it)
                self.done.put((index, _Raised(exc)))
                return
            if index in self.abandoned:  # a replacement took this worker's place meanwhile
                return

    def stop(self, n_workers: int) -> None:
        self.stopped.set()
        for _ in range(n_workers + 1):
            self.todo.put(None)


GRACE_S = 3.0  # on Ctrl+C/SIGTERM: how long the calls in flight may take to finish (and be kept)


class _Live:
    """One :func:`run_live`: the outputs settled, the examples remaining, the calls started, and which
    example's output is settled by whom (its worker, when the reply came; the watch, on a timeout)."""

    def __init__(self, agent, examples: Sequence[Example], retries: int, backoff_s: float, on_output):
        self.agent, self.examples, self.retries, self.backoff_s = agent, examples, retries, backoff_s
        self.on_output = on_output
        self.breaker = getattr(agent, "breaker", None)
        self.outputs: list[AgentOutput | None] = [None] * len(examples)
        self.remaining = set(range(len(examples)))
        self.starts: dict[int, float] = {}
        self._claimed: set[int] = set()
        self._claiming = threading.Lock()

    def claim(self, i: int) -> bool:
        with self._claiming:
            fresh = i not in self._claimed
            self._claimed.add(i)
            return fresh

    def call(self, i: int):
        """On a worker: the call, and its output kept the moment the reply is in (a reply paid for is
        journaled before the worker takes the next example: a SIGKILL loses only the calls in flight);
        ``None`` when it is not kept (the endpoint found down, or the call timed out meanwhile)."""
        result = _timed_call(self.agent, self.examples[i], self.starts, i, self.retries, self.backoff_s)
        if isinstance(result[1], EndpointDown) or (self.breaker is not None and self.breaker.open) or not self.claim(i):
            return result, None
        output = _to_output(self.agent, self.examples[i], *result)
        if self.on_output:
            self.on_output(output)
        return result, output

    def settle(self, i: int, output: AgentOutput) -> None:
        self.outputs[i] = output
        self.remaining.discard(i)
        self.starts.pop(i, None)

    def timed_out(self, timeout_s: float) -> list[int]:
        """The calls running past ``timeout_s``, each settled as a timeout (unless its reply came meanwhile)."""
        now = time.perf_counter()
        late = []
        for j in [j for j, t in list(self.starts.items()) if j in self.remaining and now - t > timeout_s]:
            if not self.claim(j):  # its reply came in meanwhile: kept by its worker
                continue
            output = AgentOutput(self.examples[j].id, None, [], timeout_s, {}, error=f"timeout: no reply within "
                                 f"{timeout_s:g} s", started_at_ns=time.time_ns() - int(timeout_s * 1e9))
            if self.on_output:
                self.on_output(output)
            self.settle(j, output)
            late.append(j)
        return late

    def wind_down(self, workers: "_Workers") -> None:
        """After a stop: the calls in flight get ``GRACE_S`` to finish (their workers keep them)."""
        deadline = time.monotonic() + GRACE_S
        while self.starts.keys() & self.remaining and time.monotonic() < deadline:
            try:
                i, done = workers.done.get(timeout=0.05)
            except queue.Empty:
                continue
            output = None if isinstance(done, _Raised) else done[1]  # (a worker's own failure: the stop is raised already)
            if output is not None and i in self.remaining:
                self.settle(i, output)
            self.starts.pop(i, None)  # returned (kept or not): no longer in flight


def run_live(agent: Callable[[Example], Any], examples: Sequence[Example], concurrency: int = 1,
             timeout_s: float | None = None, on_done: Callable[[int], None] | None = None,
             retries: int = 0, backoff_s: float = 0.5,
             on_output: Callable[[AgentOutput], None] | None = None) -> list[AgentOutput]:
    """Call ``agent`` once per example (plus ``retries`` on retryable failures); outputs are in
    input order, and each is handed to ``on_output`` as soon as it is known (the journal).

    A call that raises, returns a malformed reply or runs past ``timeout_s`` yields an output with
    ``error`` set (its latency is what was measured, the timeout for a timed-out call). A timed-out
    call cannot be killed: it is abandoned to its daemon thread and its result discarded.

    On Ctrl+C (SIGTERM: :class:`ragmem.errors.Terminated`), a full disk (:class:`ragmem.runtime.space.DiskFull`)
    or the agent's endpoint breaker opening (:class:`ragmem.clients.endpoints.EndpointDown`: the call that tripped
    it is not kept) no new call starts, the calls in flight get ``GRACE_S`` to finish (their outputs go to ``on_output``), and the stop is re-raised.
    ``on_output`` is called on the worker thread that received the reply (it must be thread-safe).
    """
    live = _Live(agent, examples, retries, backoff_s, on_output)
    workers = _Workers(live.call, concurrency)
    n_workers = max(1, concurrency)
    for index in range(len(examples)):
        workers.todo.put(index)
    try:
        while live.remaining:
            interrupts.check()  # a sweep interrupted on the main thread stops its children here
            space.check()  # the disk filled: wound down below like an interrupt (what is in flight kept)
            i: int | None
            done: Any
            try:
                i, done = workers.done.get(timeout=0.05)
            except queue.Empty:
                i, done = None, (None, None)  # (nothing done this turn)
            if isinstance(done, _Raised):
                raise done.exc
            result, output = done
            n = 0
            if i is not None and output is None and isinstance(result[1], EndpointDown):  # the agent's endpoint is down
                live.starts.pop(i, None)  # (not kept: made again on resume)
                raise result[1]
            if live.breaker is not None and live.breaker.open:
                if i is not None and output is None:
                    live.starts.pop(i, None)  # the call that found the endpoint dead: not kept, made again on resume
                live.breaker.check()  # raises EndpointDown: wound down below like an interrupt
            if output is not None and i in live.remaining:
                live.settle(i, output)
                n += 1
            for j in live.timed_out(timeout_s) if timeout_s else ():
                workers.abandoned.add(j)
                workers.add_worker()  # the stuck call keeps its thread; the others go on
                n_workers += 1
                n += 1
            if on_done and n:
                on_done(n)
    except (KeyboardInterrupt, EndpointDown, space.DiskFull):
        workers.stop(n_workers)
        live.wind_down(workers)
        raise
    except BaseException:  # (a worker's failure to keep an output: no new call starts)
        workers.stop(n_workers)
        raise
    workers.stop(n_workers)
    return [o for o in live.outputs if o is not None]


def _to_output(agent: Any, example: Example, raw: Any, exc: BaseException | None, seconds: float, wall: int,
               attempts: int) -> AgentOutput:
    if exc is not None:  # an endpoint's failure as every client words it; an in-process agent's as it raised it
        line = calls.describe(exc) if getattr(agent, "breaker", None) is not None else failure_message(exc)
        return AgentOutput(example.id, None, [], seconds, {}, line, wall, attempts)
    try:
        answer, contexts, timings = parse_reply(raw)
    except ReplyError as err:
        return AgentOutput(example.id, None, [], seconds, {}, f"malformed reply: {err}", wall, attempts)
    return AgentOutput(example.id, answer, contexts, seconds, timings, None, wall, attempts)
