"""Which process ran a run, and whether it still runs: a run left RUNNING by a process that is gone
(SIGKILL, power loss) can be resumed (:mod:`ragmem.run.resume`), shows as ``DEAD`` in the tables
(:mod:`ragmem.tracking.runs`), and is reopened by the tracker (:mod:`ragmem.tracking.store`). And whether
a local port is free for a server (the managed Prefect server, ``ragmem ui``), and what tells a process
apart from a later one given the same number (its start time)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path


def bind_error(host: str, port: int) -> OSError | None:
    """Why nothing can listen on ``host:port`` now (another process holds it, the address is not
    this machine's), or ``None`` when it is free."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc
    return None


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


def process_identity(pid: int) -> str | None:
    """What tells process ``pid`` apart from a later process given the same number: its start time
    (``/proc/PID/stat`` field 22 on Linux, ``ps -o lstart=`` elsewhere); ``None`` when no such process
    runs, a zombie included (ended, not yet reaped by its parent: it holds nothing, no port, no lock).
    (Not the command line: right after a start it can still be empty.)"""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else fields[19]
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None  # Linux, and the process is gone
    except (OSError, IndexError):
        return None
    done = subprocess.run(["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True)
    return done.stdout.strip() or None
