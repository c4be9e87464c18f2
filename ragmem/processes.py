"""Which process ran a run, and whether it still runs: a run left RUNNING by a process that is gone
(SIGKILL, power loss) can be resumed (:mod:`ragmem.resume`), shows as ``DEAD`` in the tables
(:mod:`ragmem.compare`), and is reopened by the tracker (:mod:`ragmem.tracking.store`)."""

from __future__ import annotations

import os
import socket


def host() -> str:
    return socket.gethostname()


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def run_is_dead(tags: dict[str, str]) -> bool | None:
    """For a RUNNING run: True when its process is gone, False when alive, None when it ran on
    another host (or recorded no pid) and cannot be checked from here."""
    pid = tags.get("ragmem.pid")
    if not pid or not pid.isdigit() or tags.get("ragmem.host") != host():
        return None
    return not process_alive(int(pid))
