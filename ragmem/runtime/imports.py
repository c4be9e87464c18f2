"""Imports of sacrebleu and MLflow without the optional integrations they load and ragmem never uses.

Two libraries that every run imports load, at import time, an optional integration whose package
happens to be installed for someone else. Measured on the 2-core development machine (benchmarks/README.md):

- sacrebleu imports portalocker (for locking its test-set downloads). portalocker imports its
  ``redis`` lock whenever ``redis`` is installed, and Prefect's pydocket installs it. That costs
  0.26 s in the main process and again in every scoring worker (``sacrebleu.metrics`` took 0.37 s
  with it and 0.10 s without).
- MLflow's SQL store imports alembic, and alembic's mako renders its error pages with pygments.
  Loading pygments' lexers costs about 0.2 s per ``ragmem run``.

Both libraries guard these imports (``try: ... except ImportError``) and fall back to a stub.
:func:`lean_import` makes those imports fail while the library is imported, then lets them work
again. A later explicit ``import portalocker.redis`` loads normally; only the name bound during
the import (``portalocker.RedisLock``, mako's highlighter) stays the fallback in this process.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

#: for each package ragmem imports, the optional modules it loads that ragmem never calls
UNUSED = {"sacrebleu": ("portalocker.redis",), "mlflow": ("mako.ext.pygmentplugin",)}

_LOCK = threading.Lock()


def lean_import(name: str) -> ModuleType:
    """``importlib.import_module(name)``; on its first import, without its package's :data:`UNUSED` modules.

    >>> lean_import("sacrebleu.metrics").BLEU.__name__
    'BLEU'
    """
    top = name.partition(".")[0]
    if name in sys.modules or not UNUSED.get(top):
        return importlib.import_module(name)
    with _LOCK:
        blocked = [m for m in UNUSED[top] if m not in sys.modules]
        for module in blocked:
            sys.modules[module] = None  # type: ignore[assignment]  # "import m" raises ImportError
        try:
            return importlib.import_module(name)
        finally:
            for module in blocked:
                if sys.modules.get(module, 0) is None:
                    del sys.modules[module]
