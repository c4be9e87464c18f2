"""One process-wide stop request, for work running on other threads.

Ctrl+C and SIGTERM reach only the main thread. When a sweep is interrupted there, its children run
on worker threads; :data:`STOP` tells them to wind down like an interrupted run (no new call, the
calls in flight get their grace, the journal is kept, the child run ends KILLED) instead of running
to the end while the process waits to exit.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator

from ragmem.errors import Terminated
from ragmem.runtime.home import ragmem_home

STOP = threading.Event()
#: the signal a ``ragmem`` command received (SIGINT or SIGTERM), kept: the exception its handler raises
#: can be lost. Python prints "Exception ignored" and goes on when a signal lands while a weakref
#: callback or a ``__del__`` runs (seen: Prefect's SIGTERM handler during the worker pool's start, a
#: run that then finished with exit 0); :func:`check` raises it again at the next check
_RECEIVED: list[int] = []


def check() -> None:
    """Raise ``KeyboardInterrupt`` when a stop was requested, or when the command received Ctrl+C or
    SIGTERM (:class:`Terminated`) whose exception was lost (called between batches and calls, at the
    start of each stage and after the command's import)."""
    if STOP.is_set():
        raise KeyboardInterrupt("stop requested")
    if _RECEIVED:
        raise _as_exception(_RECEIVED[-1])


def received() -> int | None:
    """The signal the command received, or ``None``."""
    return _RECEIVED[-1] if _RECEIVED else None


def exit_code(exc: BaseException) -> int:
    """143 for a SIGTERM, 130 for a Ctrl+C: by the exception's kind (:class:`Terminated`, or a
    ``Stopped`` carrying 143), else by the signal the command received, since a library may catch a
    SIGTERM's ``Terminated`` and raise a plain ``KeyboardInterrupt`` of its own (seen during the
    command's import: ``interrupted``, exit 130, after a SIGTERM)."""
    if isinstance(exc, Terminated) or getattr(exc, "exit_code", None) == 143 or received() == signal.SIGTERM:
        return 143
    return 130


def _as_exception(signum: int) -> KeyboardInterrupt:
    return Terminated(f"terminated by signal {signum}") if signum == signal.SIGTERM else KeyboardInterrupt()


def interrupt_in(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl+C or SIGTERM inside ``exc``, when a library turned it into an error of its own; else
    ``None``. Seen: Prefect's task engine raising ``ValueError: Task run is not set`` while handling
    an interrupt that hit its start (the interrupt is the error's context), and pydantic's serializer
    reporting ``Error calling function ...: KeyboardInterrupt`` (a message, nothing chained). Such an
    error is still the interrupt: one line, exit 130 (143), the run KILLED."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    if type(exc).__name__ == "PydanticSerializationError":
        text = str(exc)
        if f"{Terminated.__name__}:" in text:
            return Terminated(text)
        if "KeyboardInterrupt:" in text:
            return KeyboardInterrupt(text)
    return None


#: the longest a command may take to end after SIGTERM: an interrupted run winds down in seconds, and
#: its exit is bounded once its line is printed (:data:`ragmem.exits.INTERRUPTED_EXIT_S`); this bounds
#: what comes before the line. Seen: SIGTERM raised inside an import of the main thread while
#: Prefect's event-loop threads imported the same module; the module lock stayed held, and Prefect's
#: crash handling waited on those threads for ever.
WIND_DOWN_S = 60.0
_ENDING = threading.Event()
_COMMAND = threading.Event()  # set by sigterm_raises: this process is a ragmem command, not a library user's
SAID = threading.Event()  # set by ragmem.exits.leave: the command's one line is out, and its own bound runs


def exit_after(seconds: float, code: int, line: str | Callable[[], str] | None = None) -> None:
    """End the process with ``code`` should it still run ``seconds`` from now (a daemon timer), first
    writing ``line`` (or what it returns) to stderr unless the command's own line is out by then (:data:`SAID`)."""

    def end() -> None:
        try:
            if line is not None and not SAID.is_set():
                os.write(2, ((line() if callable(line) else line) + "\n").encode())
        finally:
            os._exit(code)

    timer = threading.Timer(seconds, end)
    timer.daemon = True  # (a daemon: the exit's join of threads must not wait for it)
    timer.start()


def _stacks_kept() -> str:
    """Every thread's stack written to ``last-error.log`` in the ragmem home (a command that did not
    wind down hangs somewhere: that is a bug, and where is what it takes to fix it); where they are."""
    path = ragmem_home() / "last-error.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as out:
            faulthandler.dump_traceback(out, all_threads=True)
    except (OSError, ValueError) as unwritable:
        return f"its threads' stacks not kept: {path}: {getattr(unwritable, 'strerror', None) or unwritable}"
    return f"its threads' stacks in {path}"


def _in_import_machinery(frame) -> bool:
    """The signal landed inside importlib's own code (taking or giving back a module's lock): an
    exception raised there can leave the lock held by the main thread, and every other thread that
    imports the module (Prefect's event-loop threads do, at a run's start) then waits for ever."""
    return frame is not None and frame.f_code.co_filename.startswith("<frozen importlib")


def _deferred(signum: int, frame) -> bool:
    """A command's signal that landed inside importlib (:func:`_in_import_machinery`) is sent again
    10 ms later, from another thread, so that its exception is raised in the module code being
    imported instead (the import then fails and gives its locks back). True when it was deferred."""
    if not _COMMAND.is_set() or not _in_import_machinery(frame):
        return False
    timer = threading.Timer(0.01, os.kill, (os.getpid(), signum))
    timer.daemon = True
    timer.start()
    return True


def raise_terminated(signum, frame) -> None:
    """The SIGTERM handler of a command and of a tracked run: Ctrl+C's way, as :class:`Terminated`.
    In a ``ragmem`` command the process ends within :data:`WIND_DOWN_S` whatever the interrupted
    code does (never in a library user's process: there the exception is theirs to handle). A
    signal inside importlib's own code is raised a moment later (:func:`_deferred`)."""
    _arm_wind_down()
    if _deferred(signum, frame):
        return
    if _COMMAND.is_set():
        _RECEIVED.append(signum)
    raise Terminated(f"terminated by signal {signum}")


def _arm_wind_down() -> None:
    """In a ``ragmem`` command, after its first SIGTERM: end the process within :data:`WIND_DOWN_S`
    (armed once: the first signal's bound holds), whoever's handler took the signal."""
    if _COMMAND.is_set() and not _ENDING.is_set():
        _ENDING.set()
        exit_after(WIND_DOWN_S, 143, lambda: f"interrupted: the command did not wind down within {WIND_DOWN_S:.0f} s of "
                                             f"the signal and was ended ({_stacks_kept()}; a run it had started keeps "
                                             f"its journal: ragmem run --resume)")


def raise_interrupt(signum, frame) -> None:
    """The SIGINT handler of a command: Python's own (``KeyboardInterrupt``), the signal kept for
    :func:`check`; inside importlib's own code, a moment later (:func:`_deferred`)."""
    if _deferred(signum, frame):
        return
    _RECEIVED.append(signum)
    raise KeyboardInterrupt


def _lost_signal(unraisable) -> None:
    """``sys.unraisablehook`` of a command: a Ctrl+C or SIGTERM whose exception a finalizer swallowed
    (a weakref callback, a ``__del__``: Python would print "Exception ignored" with a traceback and
    go on; seen inside importlib's module-lock callback while a judge's requests hung, and the run
    went on until its wind-down bound) is sent again: it lands in the code the finalizer interrupted,
    and the command ends through its one line. Anything else goes to the hook before it."""
    exc = unraisable.exc_value
    if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "TerminationSignal":  # (Prefect's)
        signum = signal.SIGINT if type(exc) is KeyboardInterrupt else signal.SIGTERM
        # sent from another thread once this hook is left: sent while it runs (from here, or by a thread
        # that fired while this one waited for a core: seen in CI), its handler would run inside it
        _IN_HOOK[0] = True
        threading.Thread(target=_send_again, args=(signum,), name="ragmem-signal-again", daemon=True).start()
        _IN_HOOK[0] = False  # (the hook's last step: nothing after it where a handler could run)
        return
    _HOOKS[0](unraisable)


def _send_again(signum: int) -> None:
    """Send ``signum`` to this process once :func:`_lost_signal` has returned (and a moment after)."""
    deadline = time.monotonic() + 5.0  # (5 s at most: never a signal kept back for good)
    while _IN_HOOK[0] and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.005)
    os.kill(os.getpid(), signum)


_HOOKS: list = []
_IN_HOOK = [False]  # whether _lost_signal runs (a list: set and read without a call, where no handler runs)


def sigterm_raises() -> None:
    """From now on SIGTERM raises :class:`ragmem.errors.Terminated` in the main thread, as Ctrl+C
    raises ``KeyboardInterrupt``: the command ends through the same line and code (143); both signals
    are kept for :func:`check`, and one whose exception a finalizer swallowed is sent again
    (:func:`_lost_signal`). Not in another thread or where signals cannot be set (an embedded
    interpreter): nothing changes."""
    if threading.current_thread() is threading.main_thread():
        _COMMAND.set()
        if sys.unraisablehook is not _lost_signal:
            _HOOKS[:] = [sys.unraisablehook]
            sys.unraisablehook = _lost_signal
        try:
            signal.signal(signal.SIGTERM, raise_terminated)
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                signal.signal(signal.SIGINT, raise_interrupt)
        except ValueError:
            pass


@contextlib.contextmanager
def kept_under(library: str) -> Iterator[None]:
    """For the block (run by ``library``, which set SIGTERM handlers of its own: Prefect's flow engine
    raises its ``TerminationSignal``), the signals a command receives are still kept for :func:`check`:
    the library's handlers are wrapped, and put back afterwards. Nothing changes outside a command."""
    if not _COMMAND.is_set() or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(sig)
        if callable(handler) and handler not in (raise_terminated, raise_interrupt):
            def keeping(signum, frame, _handler=handler):
                if signum == signal.SIGTERM:  # (seen in CI: SIGTERM under Prefect's flow engine, whose crash
                    _arm_wind_down()          # handling then waited for ever on a module lock: no bound was armed)
                if _deferred(signum, frame):
                    return None
                _RECEIVED.append(signum)
                return _handler(signum, frame)
            keeping.__qualname__ = f"kept_under({library}).{getattr(handler, '__name__', 'handler')}"
            previous[sig] = signal.signal(sig, keeping)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
