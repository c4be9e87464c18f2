"""When the shared local Prefect server may stop: the commands that use it hold a *lease*, and a
watcher process (:mod:`ragmem.orchestration.watcher`) started with the server stops it once no lease is held and the idle period of the
last command that held one has passed.

A lease is a file ``leases/<pid>.json`` in the server's folder (:func:`ragmem.orchestration.server.server_home`),
taken under the server's lock when a command finds or starts the server, and given back when the
command ends (``atexit``). It records the command, its ragmem home and its idle period
(``orchestration.server_idle_s``). The command holds an exclusive lock on its lease file for as long
as it runs; the kernel lets go of it however the command ends (SIGKILL too). A lease counts as held
while its file is locked, or while its process runs (checked by its start time, not only its pid: a
lease of an older ragmem, which locks nothing); the watcher of any install reads it the same way, and
a holder whose pid it cannot see (another pid namespace sharing the folder) still holds by its lock.
A lease neither locked nor running counts as given back when the watcher finds it. Giving a lease back writes ``idle-until``: the time the server may
stop, the ending command's idle period from now (``null``: never, until ``ragmem server stop``).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from ragmem.runtime.home import file_lock, ragmem_home

try:
    import fcntl
except ImportError:  # pragma: no cover (Windows: leases are checked by their process alone)
    fcntl = None  # type: ignore[assignment]

from ragmem.runtime.processes import process_identity

POLL_S = 2.0
_LOCKS: dict[Path, Any] = {}  # this process's leases: their open, locked files


def _identity(pid: int) -> str | None:
    return process_identity(pid)


def _write(path: Path, data: dict[str, Any]) -> None:
    """Written whole or not at all (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(data), encoding="utf-8")
    os.replace(partial, path)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def take(folder: Path, idle_s: float | None) -> Path:
    """A lease on the server in ``folder`` for this process, given back at its exit (:func:`give_back`)."""
    path = folder / "leases" / f"{os.getpid()}.json"
    lease = {"pid": os.getpid(), "identity": _identity(os.getpid()), "home": str(ragmem_home()),
             "cwd": os.getcwd(), "command": " ".join(["ragmem", *sys.argv[1:]])[:300], "idle_s": idle_s,
             "since": time.time()}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    handle = open(partial, "w", encoding="utf-8")  # noqa: SIM115  (held open, locked, until the lease is given back)
    handle.write(json.dumps(lease))
    handle.flush()
    if fcntl is not None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # locked before it has its name: never seen unlocked
    os.replace(partial, path)
    _LOCKS[path] = handle
    atexit.register(give_back, path)
    return path


def _locked(path: Path) -> bool:
    """Another open file holds the lease file's lock: its command runs (in whatever pid namespace)."""
    if fcntl is None:  # pragma: no cover (not on POSIX: the process check alone)
        return False
    try:
        with open(path, "rb") as probe:
            try:
                fcntl.flock(probe.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(probe.fileno(), fcntl.LOCK_UN)
            return False
    except OSError:
        return False


def give_back(path: Path) -> None:
    """This process's lease given back: the server may stop once the lease's idle period has passed."""
    lease = _read(path)
    path.unlink(missing_ok=True)
    handle = _LOCKS.pop(path, None)
    if handle is not None:
        handle.close()  # (its lock with it)
    if lease is not None:
        _idle_from_now(path.parent.parent, lease.get("idle_s"))


def _idle_from_now(folder: Path, idle_s: float | None) -> None:
    _write(folder / "idle-until", {"until": None if idle_s is None else time.time() + float(idle_s), "idle_s": idle_s})


def held(folder: Path) -> list[dict[str, Any]]:
    """The leases whose commands still run; the files of the others (killed) are given back now."""
    out = []
    for path in sorted((folder / "leases").glob("*.json")):
        lease = _read(path)
        if lease is None:
            continue
        alive = _locked(path) or (lease.get("identity") is not None and _identity(int(lease["pid"])) == lease["identity"])
        if alive:
            out.append(lease)
        else:
            give_back(path)
    return out


def idle_until(folder: Path) -> float | None:
    """When the server may stop (epoch seconds); ``inf`` when never; ``None`` when no lease was ever given back."""
    record = _read(folder / "idle-until")
    if record is None:
        return None
    return float("inf") if record.get("until") is None else float(record["until"])


def watch(folder: Path, stop: Callable[[], bool], running: Callable[[], bool], poll_s: float = POLL_S,
          default_idle_s: float | None = 1800.0) -> str:
    """Wait until the server may stop, then :func:`stop` it (under the server's lock, the leases
    checked again there; ``stop`` returns once the process is gone, True, or finds it gone already,
    False, and raises when it outlives SIGKILL): returns why the watch ended. ``running()`` says whether the server still
    runs (stopped by ``ragmem server stop``: nothing left to watch)."""
    started = time.time()
    while True:
        time.sleep(poll_s)
        if not running():
            return "the server stopped"
        if held(folder):
            continue
        until = idle_until(folder)
        if until is None:  # started, never used (ragmem server start): its idle period counts from its start
            until = float("inf") if default_idle_s is None else started + default_idle_s
        if time.time() < until:
            continue
        with file_lock(folder / "server.lock", what="the Prefect server"):
            if held(folder) or (idle_until(folder) or 0) > time.time():
                continue  # a command took it meanwhile
            idle_s = (_read(folder / "idle-until") or {"idle_s": default_idle_s}).get("idle_s")
            if not stop():  # (its process confirmed gone; False: it was gone already)
                return "the server stopped"
            return f"stopped the server: no command used it for {idle_s:g} s"
