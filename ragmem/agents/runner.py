"""Timing agent calls: monotonic clock per call, bounded concurrency, per-call timeout, results in
input order, one failure recorded per example without stopping the others.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Callable, Sequence

from ragmem.schema import AgentOutput, Context, Example


class ReplyError(ValueError):
    """The agent returned something that is not an answer."""


def _contexts(value: Any) -> list[Context]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise ReplyError(f"contexts must be a list, got {type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, Context):
            out.append(item)
        elif isinstance(item, str):
            out.append(Context(text=item))
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            score = item.get("score")
            out.append(Context(text=item["text"], id=None if item.get("id") is None else str(item["id"]),
                               source=item.get("source"), score=None if score is None else float(score)))
        else:
            raise ReplyError(f"contexts[{i}] must be a string or an object with 'text'")
    return out


def _timings(value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ReplyError(f"timings must be an object of stage -> seconds, got {type(value).__name__}")
    try:
        return {str(k): float(v) for k, v in value.items()}
    except (TypeError, ValueError):
        raise ReplyError("timings values must be numbers (seconds)") from None


def parse_reply(raw: Any) -> tuple[str, list[Context], dict[str, float]]:
    """Accept a string, a dict, an object with attributes or a tuple; see :mod:`ragmem.agents`."""
    if isinstance(raw, str):
        return raw, [], {}
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
    return answer, _contexts(contexts), _timings(timings)


def _timed_call(agent: Callable[[Example], Any], example: Example, starts: dict[int, float],
                index: int, retries: int, backoff_s: float) -> tuple[Any, BaseException | None, float, int, int]:
    """Call with retries on retryable failures (exponential backoff with jitter); the latency is
    that of the last attempt, timed with the monotonic clock."""
    retryable = getattr(agent, "retryable", lambda exc: False)
    attempt = 0
    while True:
        attempt += 1
        wall = time.time_ns()
        start = time.perf_counter()
        starts[index] = start
        try:
            raw = agent(example)
            return raw, None, time.perf_counter() - start, wall, attempt
        except Exception as exc:  # any failure of the user's agent is recorded for that example
            elapsed = time.perf_counter() - start
            if attempt > retries or not retryable(exc):
                return None, exc, elapsed, wall, attempt
        starts.pop(index, None)  # backing off: not "running" for the timeout watch
        time.sleep(backoff_s * (2 ** (attempt - 1)) * random.uniform(0.5, 1.5))


def run_live(agent: Callable[[Example], Any], examples: Sequence[Example], concurrency: int = 1,
             timeout_s: float | None = None, on_done: Callable[[int], None] | None = None,
             retries: int = 0, backoff_s: float = 0.5) -> list[AgentOutput]:
    """Call ``agent`` once per example (plus ``retries`` on retryable failures); outputs are in
    input order.

    A call that raises, returns a malformed reply or runs past ``timeout_s`` yields an output with
    ``error`` set (its latency is what was measured, the timeout for a timed-out call). A timed-out
    call cannot be killed: its thread finishes in the background and its result is discarded.
    """
    outputs: list[AgentOutput | None] = [None] * len(examples)
    starts: dict[int, float] = {}
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="ragmem-agent")
    try:
        futures: dict[Future, int] = {pool.submit(_timed_call, agent, ex, starts, i, retries, backoff_s): i
                                      for i, ex in enumerate(examples)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.05 if timeout_s else None, return_when=FIRST_COMPLETED)
            for future in done:
                i = futures[future]
                outputs[i] = _to_output(examples[i], *future.result())
            if on_done and done:
                on_done(len(done))
            if timeout_s:
                now = time.perf_counter()
                expired = {f for f in pending if futures[f] in starts and now - starts[futures[f]] > timeout_s}
                for future in expired:
                    i = futures[future]
                    future.cancel()
                    outputs[i] = AgentOutput(examples[i].id, None, [], timeout_s, {},
                                             error=f"timeout: no reply within {timeout_s:g} s",
                                             started_at_ns=time.time_ns() - int(timeout_s * 1e9))
                pending -= expired
                if on_done and expired:
                    on_done(len(expired))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return [o for o in outputs if o is not None]


def _to_output(example: Example, raw: Any, exc: BaseException | None, seconds: float, wall: int,
               attempts: int) -> AgentOutput:
    if exc is not None:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return AgentOutput(example.id, None, [], seconds, {}, f"{type(exc).__name__}: {message}".rstrip(": "),
                           wall, attempts)
    try:
        answer, contexts, timings = parse_reply(raw)
    except ReplyError as err:
        return AgentOutput(example.id, None, [], seconds, {}, f"malformed reply: {err}", wall, attempts)
    return AgentOutput(example.id, answer, contexts, seconds, timings, None, wall, attempts)
