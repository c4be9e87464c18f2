"""A user's own code named in a config: ``module:function`` imported from the working directory and
the config's folders, or a callable given to the Python API in this process (``given:``).

Agents (``agent.target``), memory layers (``bench.methods``) and metrics of one's own
(``metrics.custom``) are all named this way; a problem is one line naming the setting.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
from typing import Any, Iterator, Sequence

from ragmem.errors import AgentLoadError, RagmemError

#: the callables given to the Python API in this process, by their target (:func:`give`)
GIVEN: dict[str, Any] = {}
GIVEN_PREFIX = "given:"
_GIVING = threading.Lock()


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


def give(obj: Any, what: str = "agent", error: type[RagmemError] = AgentLoadError) -> str:
    """The target that names ``obj`` (a callable given to the Python API) in this process: ``given:`` and
    its qualified name (``given:my_notebook.answer``), made unique when two differ under one name. It
    is what the config, the run's params and the journal hold; ``what`` names the argument in errors."""
    if not callable(obj):
        raise error(f"{what}: expected a callable (a function, an async function or an object with "
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


def resolve(target: str, folders: Sequence[str] = (), setting: str = "agent.target",
            error: type[RagmemError] = AgentLoadError) -> Any:
    """Import ``module:attr`` (``attr`` may be dotted). The working directory is importable, as it is
    for ``python -m``, then ``folders`` (``import_paths``: the config file's folder and any listed),
    so a user's own ``my_agent.py`` next to the config just works wherever the command is run. A
    ``given:`` target is the callable given in this process (:func:`give`). A problem is an ``error``
    naming ``setting``."""
    if target.startswith(GIVEN_PREFIX):
        if target not in GIVEN:
            raise error(f"{setting}: {target} is a callable given to the Python API in another process; "
                        f"name it as module:function to run it here")
        return GIVEN[target]
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise error(f"{setting}: expected 'module:function', got {target!r}")
    try:
        with contextlib.ExitStack() as stack:
            for folder in (os.getcwd(), *folders):
                stack.enter_context(_importable(folder))
            obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise error(f"{setting}: cannot import module {module_name!r}: {exc}") from None
    except Exception as exc:  # the user's module raised while it was imported
        raise error(f"{setting}: importing module {module_name!r} failed: {type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise error(f"{setting}: module {module_name!r} has no attribute {attr!r}") from None
    return obj
