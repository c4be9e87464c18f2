"""A signal whose exception Python lost still stops the command.

Python runs a signal's handler at the next instruction of the main thread; when that instruction is in
a finalizer (a ``__del__``, a weakref callback), the exception the handler raises is printed as
"Exception ignored" and the code goes on. Seen in ``.ci/run``: SIGTERM during the worker pool's start
landed in a weakref callback under Prefect's handler, and the run finished with exit 0. The command
sends such a signal again (its ``sys.unraisablehook``), so that it lands in the code the finalizer
interrupted; and it keeps the signal it received, so that the next check (between batches and calls,
at each stage's start, after the command's import) raises it should it be lost again.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from ragmem.errors import Stopped, Terminated
from ragmem.runtime import interrupts, progress


@pytest.fixture
def command(monkeypatch):
    """This process as a ragmem command (the signals kept), without the wind-down bound's timer."""
    monkeypatch.setattr(interrupts, "_COMMAND", threading.Event())
    monkeypatch.setattr(interrupts, "_ENDING", threading.Event())
    monkeypatch.setattr(interrupts, "_RECEIVED", [])
    interrupts._COMMAND.set()
    interrupts._ENDING.set()  # (armed already: no exit_after timer in the test process)
    lost = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: lost.append(unraisable.exc_type))
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield lost
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _lose_in_a_finalizer(sig: int) -> None:
    class Finalized:
        def __del__(self):
            os.kill(os.getpid(), sig)
            for _ in range(1000):  # the handler runs at one of these instructions, inside __del__
                pass

    Finalized()  # (freed at once: __del__ runs here)


@pytest.mark.parametrize("sig,raised", [(signal.SIGTERM, Terminated), (signal.SIGINT, KeyboardInterrupt)])
def test_a_signal_lost_in_a_finalizer_is_sent_again_and_lands_after_it(command, sig, raised, monkeypatch):
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # (put back after the test)
    interrupts.sigterm_raises()
    assert sys.unraisablehook is interrupts._lost_signal
    _lands_after_the_finalizer(sig, raised, command)


def _lands_after_the_finalizer(sig: int, raised: type[BaseException], command: list) -> None:
    """The signal lost in a finalizer is raised here, after it, and nothing reached the hook before."""
    with pytest.raises(raised):
        _lose_in_a_finalizer(sig)
        deadline = time.monotonic() + 30  # (generous: the sending thread may wait for a core on a busy machine)
        while time.monotonic() < deadline:  # the signal, sent again a moment later, is handled here: after the finalizer
            time.sleep(0.001)
    assert not command  # (no "Exception ignored" printed)


@pytest.mark.parametrize("sig,raised", [(signal.SIGTERM, Terminated), (signal.SIGINT, KeyboardInterrupt)])
def test_a_signal_sent_again_never_lands_inside_the_hook_on_a_busy_machine(command, sig, raised, monkeypatch):
    """The hook's thread starts, and this thread gets a core back only 0.2 s later (as in CI, where a
    timer of 5 ms sent the signal while the hook still waited in ``Thread.start``: its handler ran
    inside the hook, and the signal was lost again)."""
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # (put back after the test)
    interrupts.sigterm_raises()
    start = threading.Thread.start

    def slow_start(self):
        start(self)
        time.sleep(0.2)  # (inside the hook)

    monkeypatch.setattr(threading.Thread, "start", slow_start)
    _lands_after_the_finalizer(sig, raised, command)


@pytest.mark.parametrize("sig,raised", [(signal.SIGTERM, Terminated), (signal.SIGINT, KeyboardInterrupt)])
def test_a_signal_lost_in_a_finalizer_is_raised_at_the_next_check(command, sig, raised, monkeypatch):
    interrupts.sigterm_raises()
    monkeypatch.setattr(sys, "unraisablehook", interrupts._HOOKS[0])  # (another hook in its place: lost for good)
    _lose_in_a_finalizer(sig)
    assert command and issubclass(command[0], raised)  # Python lost it: the code went on
    assert interrupts.received() == sig
    with pytest.raises(raised):
        interrupts.check()
    with pytest.raises(raised):  # no stage starts either
        with progress.stage("metrics", 10):
            pass


def test_under_a_library_handler_the_signal_is_kept_and_the_library_still_handles_it(command, monkeypatch):
    class LibrarySignal(BaseException):
        pass

    def library_handler(signum, frame):  # Prefect's flow engine: raises its TerminationSignal
        raise LibrarySignal(signum)

    signal.signal(signal.SIGTERM, library_handler)
    armed = []
    monkeypatch.setattr(interrupts, "exit_after", lambda seconds, code, line=None: armed.append((seconds, code)))
    monkeypatch.setattr(interrupts, "_ENDING", threading.Event())
    with interrupts.kept_under("prefect"):
        _lose_in_a_finalizer(signal.SIGTERM)
        assert command == [LibrarySignal]  # the library's handler ran (and Python lost its exception)
        # and the command's bound is armed all the same (seen in CI: under Prefect's handler, none was)
        assert armed == [(interrupts.WIND_DOWN_S, 143)]
        with pytest.raises(Terminated):
            interrupts.check()
    assert signal.getsignal(signal.SIGTERM) is library_handler  # put back


def test_outside_a_command_nothing_is_kept_and_nothing_changes(monkeypatch):
    monkeypatch.setattr(interrupts, "_COMMAND", threading.Event())
    monkeypatch.setattr(interrupts, "_RECEIVED", [])
    before = signal.getsignal(signal.SIGTERM)
    with interrupts.kept_under("prefect"):
        assert signal.getsignal(signal.SIGTERM) is before
    interrupts.check()  # (nothing received)
    assert interrupts.received() is None


def _an_import_machinery_frame():
    """A real frame of importlib's own code: the caller of a meta-path finder's find_spec."""
    seen = []

    class Finder:
        def find_spec(self, name, path=None, target=None):
            if name == "ragmem_no_such_module":
                seen.append(sys._getframe(1))
            return None

    sys.meta_path.insert(0, Finder())
    try:
        with pytest.raises(ImportError):
            __import__("ragmem_no_such_module")
    finally:
        sys.meta_path.pop(0)
    return seen[0]


def test_a_signal_inside_importlib_is_raised_a_moment_later_outside_it(command):
    """Seen in CI: SIGTERM 2.5 s into ``ragmem run`` hung it until its wind-down bound (60 s). The
    exception, raised while importlib held a module's lock, left the lock held; Prefect's threads,
    importing the same module, waited for ever. A signal that lands in importlib's own code is sent
    again 10 ms later (its exception then raised in the code being imported, which gives its locks back)."""
    inside = _an_import_machinery_frame()
    assert inside.f_code.co_filename.startswith("<frozen importlib")
    assert interrupts._in_import_machinery(inside) and not interrupts._in_import_machinery(sys._getframe())
    interrupts.sigterm_raises()
    with pytest.raises(Terminated):
        interrupts.raise_terminated(signal.SIGTERM, inside)  # deferred: returns
        assert interrupts.received() is None  # (kept only when it is raised)
        deadline = time.monotonic() + 30  # (generous: the timer's thread may wait for a core on a busy machine)
        while time.monotonic() < deadline:  # sent again, it lands here, in ordinary code
            time.sleep(0.001)
    assert interrupts.received() == signal.SIGTERM
    with pytest.raises(KeyboardInterrupt):
        interrupts.raise_interrupt(signal.SIGINT, inside)  # deferred as well
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            time.sleep(0.001)
    with pytest.raises(Terminated):  # in ordinary code: at once
        interrupts.raise_terminated(signal.SIGTERM, sys._getframe())


def test_the_exit_code_follows_the_signal_received_when_a_library_changed_the_exception(command):
    """Seen: a SIGTERM during the command's import came out as a plain KeyboardInterrupt (exit 130)."""
    assert interrupts.exit_code(KeyboardInterrupt()) == 130
    assert interrupts.exit_code(Terminated()) == 143 and interrupts.exit_code(Stopped(Terminated())) == 143
    interrupts._RECEIVED.append(signal.SIGTERM)
    assert interrupts.exit_code(KeyboardInterrupt()) == 143 and interrupts.exit_code(Stopped(KeyboardInterrupt())) == 143
