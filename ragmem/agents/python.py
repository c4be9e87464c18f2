"""A Python callable as the agent: ``module:function`` or ``module:Class``, or a function or object
given to ``ragmem.evaluate(agent=...)`` (:func:`ragmem.runtime.targets.give`); sync or ``async``."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any, Callable, Sequence

from ragmem.errors import AgentLoadError, failure_message
from ragmem.runtime.targets import resolve
from ragmem.schema import Example
from ragmem.runtime.contained import PluginExit


async def _awaited(reply: Any) -> Any:
    return await reply


_LOOPS = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop:
    """The event loop of the calling worker thread, made once and kept (an async agent's clients made
    on a first call stay usable on the next ones of the same thread; ``agent.concurrency`` threads)."""
    loop = getattr(_LOOPS, "loop", None)
    if loop is None or loop.is_closed():
        loop = _LOOPS.loop = asyncio.new_event_loop()
    return loop


class PythonAgent:
    name = "python"
    live = True

    def __init__(self, target: str, params: dict[str, Any] | None = None, folders: Sequence[str] = ()):
        obj = resolve(target, folders)
        if inspect.isclass(obj):
            try:
                obj = obj(**(params or {}))
            except Exception as exc:
                raise AgentLoadError(f"agent.target: building {target} failed: {failure_message(exc)}") from None
        elif params:
            raise AgentLoadError("agent.params: only a class target takes params")
        self._take(target, obj)

    @classmethod
    def of(cls, obj: Callable[..., Any], name: str) -> "PythonAgent":
        """An agent built already (the reference agent, from the run's validated settings), called as
        a target's would be."""
        agent = cls.__new__(cls)
        agent._take(name, obj)
        return agent

    def _take(self, target: str, obj: Any) -> None:
        if not callable(obj):
            raise AgentLoadError(f"agent.target: {target} is not callable")
        self.target = target
        self._fn: Callable[..., Any] = obj
        self.instance = obj  # the function, or the object built from a class target
        self._kwargs = self._accepted_kwargs(obj)
        call = getattr(obj, "__call__", None)  # noqa: B004  (its __call__ method, to see whether it is async)
        self._async = inspect.iscoroutinefunction(obj) or inspect.iscoroutinefunction(call)

    @staticmethod
    def _accepted_kwargs(fn: Callable[..., Any]) -> set[str]:
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            return set()
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return {"session_id", "history"}
        return {p.name for p in params} & {"session_id", "history"}

    def __call__(self, example: Example) -> Any:
        kwargs: dict[str, Any] = {}
        if "session_id" in self._kwargs:
            kwargs["session_id"] = example.session_id
        if "history" in self._kwargs:
            kwargs["history"] = example.history
        reply = self._fn(example.query, **kwargs)
        if self._async or inspect.isawaitable(reply):  # an async agent: on this worker thread's own event loop
            return _thread_loop().run_until_complete(_awaited(reply))
        return reply

    @staticmethod
    def retryable(exc: BaseException) -> bool:
        """A Python agent's exception is retried (it may be a passing backend failure); its call of
        ``sys.exit`` or ``os._exit`` is not (:class:`ragmem.runtime.contained.PluginExit`)."""
        return not isinstance(exc, PluginExit)

    def signature(self) -> str:
        return f"agent:python|target:{self.target}"
