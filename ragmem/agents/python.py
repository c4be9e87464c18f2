"""A Python callable as the agent: ``module:function`` or ``module:Class``, or a function or object
given to ``ragmem.evaluate(agent=...)`` (:func:`give`); sync or ``async``."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import os
import sys
import threading
from typing import Any, Callable, Iterator, Sequence

from ragmem.errors import AgentLoadError, failure_message
from ragmem.schema import Example


@contextlib.contextmanager
def _importable(folder: str) -> Iterator[None]:
    """``folder`` importable for the block only: ``sys.path`` is left as it was found."""
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        yield
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)


#: the callables given to ``ragmem.evaluate(agent=...)`` in this process, by their target (:func:`give`)
GIVEN: dict[str, Any] = {}
GIVEN_PREFIX = "given:"
_GIVING = threading.Lock()


def give(obj: Any) -> str:
    """The target that names ``obj`` (a callable given as the agent) in this process: ``given:`` and its
    qualified name (``given:my_notebook.answer``), made unique when two differ under one name. It is
    what ``agent.target``, the run's params and the journal's config hold."""
    if not callable(obj):
        raise AgentLoadError(f"agent: expected a callable (a function, an async function or an object with "
                             f"__call__), got {type(obj).__name__}")
    name = f"{GIVEN_PREFIX}{getattr(obj, '__module__', None) or 'object'}." \
           f"{getattr(obj, '__qualname__', None) or type(obj).__qualname__}"
    with _GIVING:
        target, n = name, 1
        while GIVEN.get(target, obj) is not obj:
            n += 1
            target = f"{name}#{n}"
        GIVEN[target] = obj
    return target


def resolve(target: str, folders: Sequence[str] = ()) -> Any:
    """Import ``module:attr`` (``attr`` may be dotted). The working directory is importable, as it is
    for ``python -m``, then ``folders`` (``import_paths``: the config file's folder and any listed),
    so a user's own ``my_agent.py`` next to the config just works wherever the command is run. A
    ``given:`` target is the callable given in this process (:func:`give`)."""
    if target.startswith(GIVEN_PREFIX):
        if target not in GIVEN:
            raise AgentLoadError(f"agent.target: {target} is a callable given to ragmem.evaluate in another "
                                 f"process; name it as module:function to run it here")
        return GIVEN[target]
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise AgentLoadError(f"agent.target: expected 'module:function', got {target!r}")
    try:
        with contextlib.ExitStack() as stack:
            for folder in (os.getcwd(), *folders):
                stack.enter_context(_importable(folder))
            obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise AgentLoadError(f"agent.target: cannot import module {module_name!r}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AgentLoadError(f"agent.target: module {module_name!r} has no attribute {attr!r}") from None
    return obj


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
        self.target = target
        obj = resolve(target, folders)
        if inspect.isclass(obj):
            try:
                obj = obj(**(params or {}))
            except Exception as exc:
                raise AgentLoadError(f"agent.target: building {target} failed: {failure_message(exc)}") from None
        elif params:
            raise AgentLoadError("agent.params: only a class target takes params")
        if not callable(obj):
            raise AgentLoadError(f"agent.target: {target} is not callable")
        self._fn: Callable[..., Any] = obj
        self.instance = obj  # the function, or the object built from a class target
        self._kwargs = self._accepted_kwargs(obj)
        call = getattr(obj, "__call__", None)
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
        kwargs = {}
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
        """A Python agent's exception is retried (it may be a passing backend failure)."""
        return True

    def signature(self) -> str:
        return f"agent:python|target:{self.target}"
