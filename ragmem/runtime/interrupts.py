"""One process-wide stop request, for work running on other threads.

Ctrl+C and SIGTERM reach only the main thread. When a sweep is interrupted there, its children run
on worker threads; :data:`STOP` tells them to wind down like an interrupted run (no new call, the
calls in flight get their grace, the journal is kept, the child run ends KILLED) instead of running
to the end while the process waits to exit.
"""

from __future__ import annotations

import signal
import threading

from ragmem.errors import Terminated

STOP = threading.Event()


def check() -> None:
    """Raise ``KeyboardInterrupt`` when a stop was requested (called between batches and calls)."""
    if STOP.is_set():
        raise KeyboardInterrupt("stop requested")


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


def raise_terminated(signum, frame) -> None:
    """The SIGTERM handler of a command and of a tracked run: Ctrl+C's way, as :class:`Terminated`."""
    raise Terminated(f"terminated by signal {signum}")


def sigterm_raises() -> None:
    """From now on SIGTERM raises :class:`ragmem.errors.Terminated` in the main thread, as Ctrl+C
    raises ``KeyboardInterrupt``: the command ends through the same line and code (143). Not in
    another thread or where signals cannot be set (an embedded interpreter): nothing changes."""
    if threading.current_thread() is threading.main_thread():
        try:
            signal.signal(signal.SIGTERM, raise_terminated)
        except ValueError:
            pass
