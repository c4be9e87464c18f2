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

from ragmem.errors import Terminated
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
    with pytest.raises(raised):
        _lose_in_a_finalizer(sig)
        deadline = time.monotonic() + 30  # (generous: the timer's thread may wait for a core on a busy machine)
        while time.monotonic() < deadline:  # the signal, sent again a moment later, is handled here: after the finalizer
            time.sleep(0.001)
    assert not command  # nothing reached the hook before (no "Exception ignored" printed)


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
