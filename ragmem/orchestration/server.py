"""ragmem's managed local Prefect server: one per machine user, shared by every ragmem home, started
when a command first needs it and stopped once no command has used it for an idle period.

``prefect server start --host 127.0.0.1`` runs in the background with its database, port, pid and
log in the server's folder, ``$RAGMEM_SERVER_HOME`` (default ``$XDG_STATE_HOME/ragmem/prefect-server``,
that is ``~/.local/state/ragmem/prefect-server``). Its port is the first free one from 4200 up, chosen
at its first start and recorded there; ``RAGMEM_PREFECT_PORT`` names it instead. Runs of every home
report to it; each run still writes its results to its own home's MLflow store (Prefect holds only
the flow runs' states). The first start takes 10-25 s (database migrations).

Each command that uses the server holds a lease while it runs; a watcher process started with the
server stops it when no lease is held and ``orchestration.server_idle_s`` (default 1800 s; null:
never) has passed since the last command ended (:mod:`ragmem.orchestration.idle`).
``ragmem server status`` shows the server, the commands using it and when it will stop, and any
other Prefect server of this user; ``ragmem server stop`` stops it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragmem.errors import RagmemError
from ragmem.orchestration import idle
from ragmem.runtime.home import file_lock, ragmem_home
from ragmem.runtime.processes import bind_error, process_identity  # noqa: F401  (also here)

DEFAULT_PORT = 4200
DEFAULT_IDLE_S = 1800.0  # orchestration.server_idle_s
START_TIMEOUT_S = 120.0
QUIET_ENV = {"DO_NOT_TRACK": "true", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}

PORTS = range(DEFAULT_PORT, DEFAULT_PORT + 100)


def server_home() -> Path:
    """The shared server's folder: ``$RAGMEM_SERVER_HOME``, else ``$XDG_STATE_HOME/ragmem/prefect-server``."""
    given = os.environ.get("RAGMEM_SERVER_HOME")
    if given:
        return Path(given).expanduser().resolve()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state).expanduser().resolve() / "ragmem" / "prefect-server"


def _port_file() -> Path:
    return server_home() / "port"


def _recorded_port() -> int | None:
    try:
        return int(_port_file().read_text().strip())
    except (OSError, ValueError):
        return None


def managed_port() -> int:
    """The shared server's port: ``RAGMEM_PREFECT_PORT``, else the recorded one, else 4200 (none recorded yet)."""
    return int(os.environ.get("RAGMEM_PREFECT_PORT") or _recorded_port() or DEFAULT_PORT)


def _bindable(port: int) -> bool:
    """Nothing listens on 127.0.0.1:``port``."""
    return bind_error("127.0.0.1", port) is None


def _ours(port: int) -> bool:
    """The Prefect server on ``port`` is the shared one (its database is in :func:`server_home`)."""
    owner = server_owner(port)
    return owner is not None and owner["prefect_home"] == str(server_home() / "prefect")


def choose_port() -> int:
    """``RAGMEM_PREFECT_PORT``; else the recorded port, unless another program holds it now; else the
    first port from 4200 up that nothing listens on, recorded for the next start."""
    if os.environ.get("RAGMEM_PREFECT_PORT"):
        return int(os.environ["RAGMEM_PREFECT_PORT"])
    recorded = _recorded_port()
    if recorded and (_bindable(recorded) or _ours(recorded)):
        return recorded
    for port in PORTS:
        if port != recorded and _bindable(port):
            _port_file().parent.mkdir(parents=True, exist_ok=True)
            _port_file().write_text(f"{port}\n")
            return port
    raise RagmemError(f"no free port in {PORTS.start}-{PORTS.stop - 1} for the local Prefect server; "
                      f"set RAGMEM_PREFECT_PORT to a free port")


def _api_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/api"


def healthy(api_url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def configured_api_url() -> str | None:
    """PREFECT_API_URL from the environment or the active Prefect profile, if any."""
    if os.environ.get("PREFECT_API_URL"):
        return os.environ["PREFECT_API_URL"]
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return str(url) if url else None


@dataclass
class ManagedServer:
    api_url: str
    pid: int | None
    started: bool


def _pid_file(folder: Path | None = None) -> Path:
    """The pid file of the shared server (or of the per-home server of an older ragmem in ``folder``)."""
    return (folder or server_home()) / "prefect-server.pid"


def process_command(pid: int) -> str:
    """The command line of process ``pid`` ("" when unknown)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        done = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True)
        return done.stdout.strip()


def _read_pid_file(path: Path) -> tuple[int, str | None] | None:
    """(pid, start time recorded at start) from a pid file; None when there is none or it is unreadable."""
    try:
        text = path.read_text().strip()
        record = json.loads(text) if text.startswith("{") else {"pid": int(text), "identity": None}
        return int(record["pid"]), record.get("identity")  # type: ignore[arg-type, return-value]  # (JSON: checked below)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def server_pid(folder: Path | None = None) -> int | None:
    """The pid of the server the pid file names, when that very process still runs (same start time);
    a stale pid file (the server gone, its number reused by another process) is removed. ``folder``:
    an older ragmem's per-home server (``<home>/.ragmem``) instead of the shared one."""
    record = _read_pid_file(_pid_file(folder))
    if record is None:
        return None
    pid, recorded = record
    now = process_identity(pid)
    if recorded:
        same = now is not None and now == recorded
    else:  # an old pid file (a bare number): only a process that is a Prefect server
        command = process_command(pid) if now is not None else ""
        same = "prefect" in command and "server" in command
    if not same:
        _pid_file(folder).unlink(missing_ok=True)
        return None
    return pid


def prefect_servers() -> list[dict[str, Any]]:
    """Every ``prefect server start`` process visible here (Linux ``/proc``): pid, port, the folder of
    its database (``PREFECT_HOME``), the ragmem home of an older per-home server, its working directory."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            words = [a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0")]
        except OSError:
            continue
        if "server" not in words or "start" not in words or not any("prefect" in w for w in words):
            continue
        port = words[words.index("--port") + 1] if "--port" in words[:-1] else str(DEFAULT_PORT)
        try:
            env = dict(v.split("=", 1) for v in (entry / "environ").read_text(errors="replace").split("\0") if "=" in v)
            cwd = os.readlink(entry / "cwd")
        except OSError:
            env, cwd = {}, None
        prefect_home = env.get("PREFECT_HOME")
        parent = Path(prefect_home).parent if prefect_home else None
        legacy = parent is not None and (parent.name == ".ragmem" or (parent / "prefect-port").is_file())
        found.append({"pid": int(entry.name), "port": int(port) if port.isdigit() else None, "cwd": cwd,
                      "prefect_home": prefect_home, "home": str(parent) if legacy else None})
    return sorted(found, key=lambda s: s["pid"])


def server_owner(port: int) -> dict[str, Any] | None:
    """The Prefect server process on ``port`` (:func:`prefect_servers`), or ``None``."""
    return next((s for s in prefect_servers() if s["port"] == port), None)


_ERROR_LINE = re.compile(r"^\s*(?:[\w.]+\.)?\w*(?:Error|Exception|Exit)\b.*|^\s*ERROR\b.*|.*\b(?:error|failed)\b.*",
                         re.IGNORECASE)


def last_error(log_text: str) -> str:
    r"""The line of a server's log that says why it stopped: the last line that reads as an error (an
    exception's line, an ERROR record), else its last line; a server's last line is often only its
    shutdown notice ("Application shutdown complete.").

    >>> last_error("INFO: starting\nOSError: [Errno 98] address already in use\nINFO: Application shutdown complete.")
    'OSError: [Errno 98] address already in use'
    """
    lines = [line.strip() for line in log_text.strip().splitlines() if line.strip()]
    if not lines:
        return "(no output)"
    found = [line for line in lines if _ERROR_LINE.match(line)]
    return (found or lines)[-1][:300]


def ensure_managed_server(port: int | None = None, log=print, idle_s: float | None = DEFAULT_IDLE_S,
                          lease: bool = True) -> ManagedServer:
    """Reuse or start the shared local Prefect server on 127.0.0.1, wait until it answers, and (with
    ``lease``) hold it for this command until it ends, ``idle_s`` being how long it may stay idle
    after (:mod:`ragmem.orchestration.idle`). Under the server's lock: of several ragmem processes
    started at once, one starts the server and the others wait for it and use it."""
    folder = server_home()
    try:
        with file_lock(folder / "server.lock", wait_s=START_TIMEOUT_S + 30, what="the Prefect server"):
            server = _reuse_or_start(port, log, idle_s)
            if lease:
                idle.take(folder, idle_s)
            return server
    except TimeoutError as exc:
        raise RagmemError(str(exc)) from None


def _reuse_or_start(port: int | None, log, idle_s: float | None) -> ManagedServer:
    port = port or choose_port()
    api_url = _api_url(port)
    if healthy(api_url):
        return ManagedServer(api_url, server_pid(), started=False)
    folder = server_home()
    (folder / "prefect").mkdir(parents=True, exist_ok=True)
    log_path = folder / "prefect-server.log"
    env = {**os.environ, **QUIET_ENV, "PREFECT_HOME": str(folder / "prefect")}
    env.pop("PREFECT_API_URL", None)
    log(f"starting the local Prefect server on 127.0.0.1:{port}, shared by every ragmem home (first start "
        f"takes ~20 s; log: {log_path})")
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=folder,
            start_new_session=True)
    _pid_file().write_text(json.dumps({"pid": proc.pid, "identity": process_identity(proc.pid)}))
    (folder / "idle-until").unlink(missing_ok=True)  # (a new server: its idle period counts from now)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if healthy(api_url, timeout=1.0):
            _start_watcher(folder, idle_s)
            return ManagedServer(api_url, proc.pid, started=True)
        if proc.poll() is not None:
            tail = last_error(log_path.read_text(errors="replace"))
            raise RagmemError(f"the local Prefect server exited with code {proc.returncode}: {tail} "
                              f"(see {log_path}; is port {port} taken? set RAGMEM_PREFECT_PORT)")
        time.sleep(0.5)
    proc.terminate()
    raise RagmemError(f"the local Prefect server did not answer within {START_TIMEOUT_S:.0f} s (see {log_path})")


def _start_watcher(folder: Path, idle_s: float | None) -> None:
    """The process that stops the server once idle (:mod:`ragmem.orchestration.watcher`), detached."""
    with open(folder / "prefect-server.log", "ab") as out:
        watcher = subprocess.Popen([sys.executable, "-m", "ragmem.orchestration.watcher", str(folder),
                                    "none" if idle_s is None else f"{idle_s:g}"],
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder,
                                   start_new_session=True)
    (folder / "watcher.pid").write_text(json.dumps({"pid": watcher.pid, "identity": process_identity(watcher.pid)}))


def _signal_group(pid: int) -> bool:
    """SIGTERM to ``pid``'s process group, SIGKILL after 5 s; False when it was already gone."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    return True


def stop_managed_server(quiet_watcher: bool = False) -> bool:
    """Stop the shared server (and its idle watcher, unless the watcher is the caller), and the
    per-home server an older ragmem started in this home; False when none was running. A pid file
    is checked against the process it names (its start time) before any signal: a stale file is
    removed and nothing is signalled."""
    stopped = False
    pid = server_pid()
    if pid is not None:
        _pid_file().unlink(missing_ok=True)
        stopped = _signal_group(pid)
    watcher = _read_pid_file(server_home() / "watcher.pid")
    if watcher and not quiet_watcher and process_identity(watcher[0]) == watcher[1]:
        _signal_group(watcher[0])
    legacy = server_pid(ragmem_home())
    if legacy is not None:
        _pid_file(ragmem_home()).unlink(missing_ok=True)
        stopped = _signal_group(legacy) or stopped
    return stopped


def status() -> dict[str, Any]:
    """What ``ragmem server status`` shows: the shared server (its URL, pid, folder), the commands
    holding it and when it may stop, and every other Prefect server process of this machine."""
    folder, port = server_home(), managed_port()
    api_url = _api_url(port)
    running = healthy(api_url)
    servers = prefect_servers()  # (one pass over /proc for both)
    ours = next((s for s in servers if s["port"] == port), None) if running else None
    until = idle.idle_until(folder)
    return {"api_url": api_url, "running": running, "pid": server_pid() or (ours or {}).get("pid"),
            "folder": str(folder), "leases": idle.held(folder) if running else [],
            "idle_until": None if until is None or until == float("inf") else until, "never_idle": until == float("inf"),
            "others": [s for s in servers if s["prefect_home"] != str(folder / "prefect")]}


def resolve_api_url(log=print, idle_s: float | None = DEFAULT_IDLE_S) -> str:
    """The API URL a flow run should report to: ``PREFECT_API_URL`` (the environment or the Prefect
    profile), else the shared local server, found or started and held for this command."""
    return configured_api_url() or ensure_managed_server(log=log, idle_s=idle_s).api_url
