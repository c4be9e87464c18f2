"""A Python callable as the agent: ``module:function`` or ``module:Class``."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import sys
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


def resolve(target: str, folders: Sequence[str] = ()) -> Any:
    """Import ``module:attr`` (``attr`` may be dotted). The working directory is importable, as it is
    for ``python -m``, then ``folders`` (``import_paths``: the config file's folder and any listed),
    so a user's own ``my_agent.py`` next to the config just works wherever the command is run."""
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
        return self._fn(example.query, **kwargs)

    @staticmethod
    def retryable(exc: BaseException) -> bool:
        """A Python agent's exception is retried (it may be a passing backend failure)."""
        return True

    def signature(self) -> str:
        return f"agent:python|target:{self.target}"
