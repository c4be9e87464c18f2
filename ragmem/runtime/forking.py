"""Processes forked from this one for a part of a map (:class:`ragmem.runtime.parallel.ForkPool`): started,
collected, stopped.

A forked child shares this process's pages until it writes to them: the imports, the data, the
segmenter's dictionary are not loaded again. Forking is safe only where no other thread may hold a
lock the child needs (:func:`fork_is_safe`). The child runs one pure function on its part, writes
its result (or its exception) to a file and ends with ``os._exit``, never running this process's
exit handlers; its output streams are new objects (a lock the progress thread held at the fork is not
the child's).
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import sys
import tempfile
import threading
import warnings
from typing import Any, Callable, Iterable, Sequence

_RUNNING: set[int] = set()  # forked children not yet waited for
_STATUS: dict[int, int] = {}  # the exit status of those waited for, until their results are read
_RESULTS: dict[int, str] = {}  # forked child -> its result file, until read


def running() -> int:
    """How many forked children run now (those that ended are waited for here)."""
    for pid in list(_RUNNING):
        try:
            ended, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # waited for elsewhere (SIGCHLD ignored): its result file tells
            ended, status = pid, 0
        if ended:
            _RUNNING.discard(pid)
            _STATUS[pid] = status
    return len(_RUNNING)


def fork(fn: Callable[..., list], part: Sequence[Any], args: tuple) -> int:
    """A child computing ``fn(part, *args)``: its pid, for :func:`reap`."""
    handle, path = tempfile.mkstemp(prefix="ragmem-map-", suffix=".pickle")
    os.close(handle)
    gc.freeze()  # the child's collections leave the shared objects (and their pages) alone
    try:
        with warnings.catch_warnings():  # Python 3.12+: "multi-threaded, fork() may deadlock" (see fork_is_safe)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            _child(fn, part, args, path)  # never returns
    finally:
        gc.unfreeze()
    _RUNNING.add(pid)
    _RESULTS[pid] = path
    return pid


def available() -> bool:
    """Whether this system forks the way the pool needs (Linux: macOS's system libraries do not
    survive a fork, Windows has none)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def fork_is_safe() -> bool:
    """:func:`available`, and no thread running but the calling one and ragmem's own (``ragmem-*``)."""
    if not available():
        return False
    current = threading.current_thread()
    return all(t is current or t.name.startswith("ragmem-") for t in threading.enumerate())


def _child(fn: Callable[..., list], part: Sequence[Any], args: tuple, path: str) -> None:
    status = 0
    try:
        sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)
        outcome: tuple = ("ok", list(fn(part, *args)))
    except BaseException as error:  # noqa: BLE001 (sent to the parent, which raises it)
        outcome = ("error", error)
    try:
        with open(path, "wb") as out:
            try:
                pickle.dump(outcome, out, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001 (an exception that does not pickle: its text)
                out.seek(0)
                out.truncate()
                pickle.dump(("error", RuntimeError(f"{type(outcome[1]).__name__}: {outcome[1]}")), out)
    except BaseException:  # noqa: BLE001 (nowhere to write: the parent reports the missing result)
        status = 1
    os._exit(status)


def _wait(pid: int) -> int:
    """Wait for a forked child to end; its exit status."""
    try:
        return os.waitpid(pid, 0)[1] if pid in _RUNNING else _STATUS.pop(pid, 0)
    except ChildProcessError:
        return 0
    finally:
        _RUNNING.discard(pid)


def reap(pid: int) -> list:
    """A forked child's results, once it ended; its exception raised here."""
    status, path = _wait(pid), _RESULTS.pop(pid)
    try:
        with open(path, "rb") as handle:
            kind, value = pickle.load(handle)
    except (OSError, EOFError, pickle.UnpicklingError):
        raise RuntimeError(f"a scoring worker (process {pid}) ended without its results (exit status "
                           f"{status}: killed, or out of memory?)") from None
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    if kind == "error":
        raise value
    return value


def discard(pids: Iterable[int] | None = None) -> None:
    """Kill forked children (default: all of them) not yet reaped, wait for them and remove their
    result files (their results are lost)."""
    for pid in list(_RESULTS if pids is None else pids):
        if pid not in _RESULTS:
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # ended already
            pass
        try:
            reap(pid)
        except BaseException:  # noqa: BLE001 (what it raised or why it ended: lost with its results)
            pass


def release_freed_memory(collect: bool = False) -> None:
    """Give the pages the C heap holds free back to the system (glibc's ``malloc_trim``; nothing
    elsewhere). After a phase that allocated and freed much (the data files' parse, the bootstrap's
    blocks of 8 MB), glibc keeps the pages: on a 10k-example run 35 MB of its peak memory.

    ``collect``: first free the garbage in reference cycles (a chunk's tables and row classes), which
    the collector's oldest generation reaches only rarely once a run holds millions of objects (at
    the end of a chunk of 10,000 fresh examples a collection takes 0.2 s)."""
    global _LIBC
    if collect:
        gc.collect()
    if _LIBC is False or not sys.platform.startswith("linux"):
        return
    try:
        if _LIBC is None:
            import ctypes

            _LIBC = ctypes.CDLL("libc.so.6")
        _LIBC.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl): nothing to release this way
        _LIBC = False


_LIBC: Any = None
