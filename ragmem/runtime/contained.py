"""Plug-in code (a metric of one's own, a Python agent) called so that it cannot end, fake or block the run.

A Python agent runs on the agent runner's own daemon workers (``agent.timeout_s`` bounds a hang):
:func:`called` intercepts its ``sys.exit`` and ``os._exit`` the same way, each that example's failure,
not retried. A metric of one's own:

The boundary, stated once (``docs/metrics.md`` says it to users): a plug-in function runs in
ragmem's process, on a daemon worker thread of its own, one call at a time, with

- ``sys.exit(3)``, ``exit()``, ``quit()`` (``SystemExit``): that call's failure, ``called sys.exit(3)``;
- ``os._exit(0)`` called while it runs (``os._exit`` is intercepted for the worker threads only:
  ragmem's own threads keep the real one): that call's failure, ``called os._exit(0)``;
- a call that does not return within ``timeout_s``: that call's failure, ``did not return within
  60 s (abandoned)``; the thread is left behind (a daemon: it keeps nothing alive) and the next
  call gets a new one;
- a thread the function starts is a daemon like the worker (Python's default: the creator's), so it
  keeps nothing alive; one started with ``daemon=False`` and left running is waited for a bounded
  time at the command's exit (:data:`ragmem.exits.LEFT_THREADS_S`), then the process ends anyway,
  saying so.

Not contained (a process would be needed, paid per run in start-up time and in the function's
arguments crossing over): a crash in native code, memory exhausted, a function that saved its
own reference to ``os._exit`` before the run. The cost here: one thread hand-over per call (about
60 µs; 10,000 examples: 0.6 s).
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any, Callable

from ragmem.errors import failure_message

_real_exit = os._exit
_workers: set[int] = set()  # the idents of the threads that run plug-in code
_lock = threading.Lock()
os.register_at_fork(after_in_child=_workers.clear)  # (a forked child runs none: its own exit is the real one)


class _Exited(BaseException):
    """``os._exit`` called by plug-in code: raised in its own thread instead."""

    def __init__(self, code: Any):
        super().__init__(code)
        self.code = code


class PluginExit(Exception):
    """Plug-in code called ``sys.exit`` or ``os._exit`` (:func:`called`): that call's failure."""


def _install() -> None:
    """``os._exit`` intercepted for the threads in :data:`_workers` (under :data:`_lock`)."""
    if os._exit is not _intercepted_exit:
        os._exit = _intercepted_exit  # type: ignore[assignment]


def called(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` on this thread (an agent's worker), with ``sys.exit`` and ``os._exit``
    raised as :class:`PluginExit` (``called os._exit(0)``), never ending the process; for plug-in code
    that already has threads of its own (a Python agent: ``agent.timeout_s`` bounds a hang)."""
    ident = threading.get_ident()
    with _lock:
        added = ident not in _workers
        _workers.add(ident)
        _install()
    try:
        return fn(*args, **kwargs)
    except _Exited as exited:
        raise PluginExit(f"called os._exit({exited.code})") from None
    except SystemExit as stopped:
        raise PluginExit(f"called sys.exit({stopped.code})") from None
    finally:
        if added:
            with _lock:
                _workers.discard(ident)


def _intercepted_exit(code: int) -> None:
    if threading.get_ident() in _workers:
        raise _Exited(code)
    _real_exit(code)


class Contained:
    """Calls ``fn(**kwargs)`` of plug-in code ``what`` one at a time (see the module):
    ``contained(fn, kwargs) -> (reply, None)`` or ``(None, reason)``."""

    def __init__(self, what: str, timeout_s: float = 60.0):
        self.what, self.timeout_s = what, timeout_s
        self._jobs: queue.Queue | None = None

    def _worker(self) -> queue.Queue:
        if self._jobs is None:
            jobs: queue.Queue = queue.Queue()
            thread = threading.Thread(target=self._serve, args=(jobs,), name=f"ragmem-plugin-{self.what}", daemon=True)
            thread.start()
            self._jobs = jobs
        return self._jobs

    @staticmethod
    def _serve(jobs: queue.Queue) -> None:
        with _lock:
            _workers.add(threading.get_ident())
            _install()
        try:
            Contained._loop(jobs)
        finally:
            with _lock:
                _workers.discard(threading.get_ident())

    @staticmethod
    def _loop(jobs: queue.Queue) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            fn, kwargs, box, done = job
            try:
                box.append((fn(**kwargs), None))
            except _Exited as exited:
                box.append((None, f"called os._exit({exited.code})"))
            except SystemExit as stopped:
                box.append((None, f"called sys.exit({stopped.code})"))
            except Exception as exc:  # the function fails on this example only
                box.append((None, failure_message(exc)[:200]))
            except BaseException as exc:  # noqa: BLE001 (anything else it raises is its failure, never the run's)
                box.append((None, f"raised {type(exc).__name__}"))
            finally:
                done.set()

    def __call__(self, fn: Callable[..., Any], kwargs: dict[str, Any]) -> tuple[Any, str | None]:
        box: list = []
        done = threading.Event()
        self._worker().put((fn, kwargs, box, done))
        if not done.wait(self.timeout_s):
            jobs, self._jobs = self._jobs, None  # abandoned: its thread stays on this call; the next call gets a new one
            if jobs is not None:
                jobs.put(None)  # (should the call ever return, its thread ends there)
            return None, f"did not return within {self.timeout_s:g} s (abandoned)"
        return box[0]

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.put(None)
            self._jobs = None
