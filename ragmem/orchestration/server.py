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
from typing import Any, Callable

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


def running_server() -> int | None:
    """The pid of the shared server: the one its pid file names, else a Prefect server of its folder
    still listening on the managed port (its pid file lost or overwritten: a server left without a
    record, which ``status`` and ``stop`` must still find), whose pid is then recorded again."""
    pid = server_pid()
    if pid is not None:
        return pid
    owner = server_owner(managed_port())
    if owner is None or owner["prefect_home"] != str(server_home() / "prefect"):
        return None
    _record_pid(owner["pid"])
    return int(owner["pid"])


def _record_pid(pid: int) -> None:
    _pid_file().parent.mkdir(parents=True, exist_ok=True)
    _pid_file().write_text(json.dumps({"pid": pid, "identity": process_identity(pid)}))


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
    folder = server_home()
    if not healthy(api_url) and _ours(port):  # the server runs but is slow to answer (a busy machine):
        _wait_for(api_url, running_server)  # never a second one beside it, over its pid file
    if healthy(api_url):
        pid = running_server()
        if pid is not None and not _watcher_alive(folder):  # (a server found without its watcher: one started)
            _start_watcher(folder, idle_s)
        return ManagedServer(api_url, pid, started=False)
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
    _record_pid(proc.pid)
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


def _wait_for(api_url: str, pid: Callable[[], int | None]) -> None:
    """Wait for a running server to answer (up to ``START_TIMEOUT_S``); one line when it never does."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if healthy(api_url, timeout=2.0) or pid() is None:
            return
        time.sleep(0.5)
    raise RagmemError(f"the local Prefect server (pid {pid()}) at {api_url} has not answered for "
                      f"{START_TIMEOUT_S:.0f} s; ragmem server stop stops it")


def _watcher_alive(folder: Path) -> bool:
    record = _read_pid_file(folder / "watcher.pid")
    return record is not None and record[1] is not None and process_identity(record[0]) == record[1]


def _start_watcher(folder: Path, idle_s: float | None) -> None:
    """The process that stops the server once idle (:mod:`ragmem.orchestration.watcher`), detached."""
    with open(folder / "prefect-server.log", "ab") as out:
        watcher = subprocess.Popen([sys.executable, "-m", "ragmem.orchestration.watcher", str(folder),
                                    "none" if idle_s is None else f"{idle_s:g}"],
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder,
                                   start_new_session=True)
    (folder / "watcher.pid").write_text(json.dumps({"pid": watcher.pid, "identity": process_identity(watcher.pid)}))


STOP_GRACE_S = 5.0  # after SIGTERM, how long a server may take to end before SIGKILL
GONE_WAIT_S = 10.0  # after SIGKILL, how long until a process not yet gone is reported as still running


class StillRunning(RagmemError):
    """A server signalled to stop that outlived SIGKILL (held by the kernel: a hung disk, a debugger)."""


def _gone(pid: int, identity: str | None, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while True:
        now = process_identity(pid)
        if now is None or (identity is not None and now != identity):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def _signal_group(pid: int) -> bool:
    """SIGTERM to ``pid``'s process group, SIGKILL after ``STOP_GRACE_S``, and the process confirmed
    gone; False when it was already gone. Raises :class:`StillRunning` when it outlives SIGKILL."""
    identity = process_identity(pid)
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    if _gone(pid, identity, STOP_GRACE_S):
        return True
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    if not _gone(pid, identity, GONE_WAIT_S):
        raise StillRunning(f"the local Prefect server (pid {pid}) still runs {STOP_GRACE_S + GONE_WAIT_S:g} s "
                           f"after SIGTERM and SIGKILL")
    return True


def stop_managed_server(quiet_watcher: bool = False) -> bool:
    """Stop the shared server (and its idle watcher, unless the watcher is the caller), and the
    per-home server an older ragmem started in this home; False when none was running. A pid file
    is checked against the process it names (its start time) before any signal: a stale file is
    removed and nothing is signalled."""
    stopped = False
    pid = running_server()
    if pid is not None:
        stopped = _signal_group(pid)  # (raises StillRunning, its pid file kept, when it outlives SIGKILL)
        _pid_file().unlink(missing_ok=True)
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
    servers = prefect_servers()  # (one pass over /proc for both)
    ours = next((s for s in servers if s["port"] == port and s["prefect_home"] == str(folder / "prefect")), None)
    answers = healthy(api_url)
    running = answers or ours is not None  # (a server of ours on its port that does not answer still runs)
    until = idle.idle_until(folder)
    return {"api_url": api_url, "running": running, "answers": answers,
            "pid": running_server() if running else None,
            "folder": str(folder), "leases": idle.held(folder) if running else [],
            "idle_until": None if until is None or until == float("inf") else until, "never_idle": until == float("inf"),
            "others": [s for s in servers if s["prefect_home"] != str(folder / "prefect")]}


def resolve_api_url(log=print, idle_s: float | None = DEFAULT_IDLE_S) -> str:
    """The API URL a flow run should report to: ``PREFECT_API_URL`` (the environment or the Prefect
    profile), else the shared local server, found or started and held for this command. A
    ``PREFECT_API_URL`` that names the shared server itself (a profile set to it by hand) holds it too:
    its idle watcher must not stop it under this command."""
    configured = configured_api_url()
    if configured is None:
        return ensure_managed_server(log=log, idle_s=idle_s).api_url
    if _names_the_shared_server(configured):
        with file_lock(server_home() / "server.lock", wait_s=START_TIMEOUT_S + 30, what="the Prefect server"):
            idle.take(server_home(), idle_s)
    return configured


def _names_the_shared_server(url: str) -> bool:
    """``url`` is the shared server's API: a loopback address on its port, where a server of its folder listens."""
    found = re.match(r"^https?://(127\.0\.0\.1|localhost|\[::1\]):(\d+)(/|$)", url.strip())
    return found is not None and int(found.group(2)) == managed_port() and _ours(managed_port())
