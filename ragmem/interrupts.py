"""One process-wide stop request, for work running on other threads.

Ctrl+C and SIGTERM reach only the main thread. When a sweep is interrupted there, its children run
on worker threads; :data:`STOP` tells them to wind down like an interrupted run (no new call, the
calls in flight get their grace, the journal is kept, the child run ends KILLED) instead of running
to the end while the process waits to exit.
"""

from __future__ import annotations

import threading

STOP = threading.Event()


def check() -> None:
    """Raise ``KeyboardInterrupt`` when a stop was requested (called between batches and calls)."""
    if STOP.is_set():
        raise KeyboardInterrupt("stop requested")
