"""ragmem's managed local Prefect server: one per home, on the home's own port, found and stopped by
the process that started it (:mod:`ragmem.orchestration.prefect_api` says when a run uses it).

``prefect server start --host 127.0.0.1`` runs in the background with its database under
``$RAGMEM_HOME/prefect`` (default ``<home>/.ragmem/prefect``, :mod:`ragmem.runtime.home`). Each home has its
own port, recorded in ``<ragmem home>/prefect-port``: the first free one from 4200 up, chosen at its
first start, so a run never reports to a server another home started. ``RAGMEM_PREFECT_PORT`` names
the port instead (whoever started the server on it; the run then says whose it is). The first start
takes 10-25 s (database migrations); the server keeps running so later runs start at once.
``ragmem server status`` shows it, ``ragmem server stop`` stops it.
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
from ragmem.runtime.home import file_lock, ragmem_home
from ragmem.runtime.processes import bind_error

DEFAULT_PORT = 4200
START_TIMEOUT_S = 120.0
QUIET_ENV = {"DO_NOT_TRACK": "true", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}

PORTS = range(DEFAULT_PORT, DEFAULT_PORT + 100)


def _port_file() -> Path:
    return ragmem_home() / "prefect-port"


def _recorded_port() -> int | None:
    try:
        return int(_port_file().read_text().strip())
    except (OSError, ValueError):
        return None


def managed_port() -> int:
    """The port of this home's managed server: ``RAGMEM_PREFECT_PORT``, else the port recorded in the
    home, else 4200 (a home that never started one; :func:`choose_port` picks it at the first start)."""
    return int(os.environ.get("RAGMEM_PREFECT_PORT") or _recorded_port() or DEFAULT_PORT)


def _bindable(port: int) -> bool:
    """Nothing listens on 127.0.0.1:``port``."""
    return bind_error("127.0.0.1", port) is None


def other_home(port: int) -> dict[str, Any] | None:
    """The owner (:func:`server_owner`) of the Prefect server on ``port`` when another ragmem home started it."""
    owner = server_owner(port)
    if owner and owner["home"] and Path(owner["home"]).resolve() != ragmem_home():
        return owner
    return None


def choose_port() -> int:
    """This home's port (see the module docstring): ``RAGMEM_PREFECT_PORT``; else the recorded port,
    unless another home's server or another program holds it now; else the first port from 4200 up
    that nothing listens on, recorded for the next runs."""
    if os.environ.get("RAGMEM_PREFECT_PORT"):
        return int(os.environ["RAGMEM_PREFECT_PORT"])
    recorded = _recorded_port()
    if recorded and other_home(recorded) is None and (_bindable(recorded) or healthy(_api_url(recorded))):
        return recorded  # (another home's server still starting there holds it too, before it listens)
    for port in PORTS:
        if port != recorded and _bindable(port) and other_home(port) is None:
            _port_file().parent.mkdir(parents=True, exist_ok=True)
            _port_file().write_text(f"{port}\n")
            return port
    raise RagmemError(f"no free port in {PORTS.start}-{PORTS.stop - 1} for this home's Prefect server; "
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


def _pid_file() -> Path:
    return ragmem_home() / "prefect-server.pid"


def process_identity(pid: int) -> str | None:
    """What tells process ``pid`` apart from a later process given the same number: its start time
    (``/proc/PID/stat`` field 22 on Linux, ``ps -o lstart=`` elsewhere); ``None`` when no such process
    runs. (Not the command line: right after a start it can still be empty.)"""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None  # Linux, and the process is gone
    except (OSError, IndexError):
        return None
    done = subprocess.run(["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True)
    return done.stdout.strip() or None


def process_command(pid: int) -> str:
    """The command line of process ``pid`` ("" when unknown)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        done = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True)
        return done.stdout.strip()


def _read_pid_file() -> tuple[int, str | None] | None:
    """(pid, start time recorded at start) from the pid file; None when there is none or it is unreadable."""
    try:
        text = _pid_file().read_text().strip()
        record = json.loads(text) if text.startswith("{") else {"pid": int(text), "identity": None}
        return int(record["pid"]), record.get("identity")
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _server_pid() -> int | None:
    """The pid of the Prefect server this home started, when that very process still runs (same
    start time); a stale pid file (the server gone, its number reused by another process) is removed."""
    record = _read_pid_file()
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
        _pid_file().unlink(missing_ok=True)
        return None
    return pid


def server_owner(port: int) -> dict[str, Any] | None:
    """Who runs the Prefect server on ``port``: its pid, the ragmem home it was started with (from
    its ``PREFECT_HOME``) and its working directory (the checkout it was started from); ``None`` when
    no ``prefect server start ... --port PORT`` process is found (or not on Linux)."""
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv]
        if "server" not in words or "start" not in words or not any("prefect" in w for w in words):
            continue
        if "--port" not in words or words[words.index("--port") + 1:][:1] != [str(port)]:
            continue
        try:
            env = dict(v.split("=", 1) for v in (entry / "environ").read_text(errors="replace").split("\0") if "=" in v)
            cwd = os.readlink(entry / "cwd")
        except OSError:
            env, cwd = {}, None
        home = env.get("PREFECT_HOME")
        return {"pid": int(entry.name), "home": str(Path(home).parent) if home else None, "cwd": cwd}
    return None


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


def ensure_managed_server(port: int | None = None, log=print) -> ManagedServer:
    """Reuse or start the local Prefect server on 127.0.0.1 and wait until it answers. Under a lock
    on the home: of several ragmem processes started at once, one starts the server and the others
    wait for it and use it (eight runs on a new project started eight servers, and the losers of the
    port failed)."""
    try:
        with file_lock(ragmem_home() / "prefect-server.lock", wait_s=START_TIMEOUT_S + 30, what="the Prefect server"):
            return _reuse_or_start(port, log)
    except TimeoutError as exc:
        raise RagmemError(str(exc)) from None


def _reuse_or_start(port: int | None, log) -> ManagedServer:
    port = port or choose_port()
    api_url = _api_url(port)
    if healthy(api_url):
        owner = other_home(port)
        if owner:  # only with RAGMEM_PREFECT_PORT: the user named the port
            log(f"Prefect server on 127.0.0.1:{port} (RAGMEM_PREFECT_PORT) was started by another ragmem home "
                f"({owner['home']}); this run reports to it")
        return ManagedServer(api_url, _server_pid(), started=False)
    home = ragmem_home()
    (home / "prefect").mkdir(parents=True, exist_ok=True)
    log_path = home / "prefect-server.log"
    env = {**os.environ, **QUIET_ENV, "PREFECT_HOME": str(home / "prefect")}
    env.pop("PREFECT_API_URL", None)
    log(f"starting a local Prefect server on 127.0.0.1:{port} (first start takes ~20 s; log: {log_path})")
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True)
    _pid_file().write_text(json.dumps({"pid": proc.pid, "identity": process_identity(proc.pid)}))
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if healthy(api_url, timeout=1.0):
            return ManagedServer(api_url, proc.pid, started=True)
        if proc.poll() is not None:
            tail = last_error(log_path.read_text(errors="replace"))
            raise RagmemError(f"the local Prefect server exited with code {proc.returncode}: {tail} "
                              f"(see {log_path}; is port {port} taken? set RAGMEM_PREFECT_PORT)")
        time.sleep(0.5)
    proc.terminate()
    raise RagmemError(f"the local Prefect server did not answer within {START_TIMEOUT_S:.0f} s (see {log_path})")


def stop_managed_server() -> bool:
    """Stop the server this project started; False when none was running. The pid file is checked
    against the process it names (its start time) before any signal: a stale file is removed and
    nothing is signalled. Without a pid file that names it, the server this home started is found by
    its port and its ``PREFECT_HOME`` (the process that runs there, started with this home's)."""
    pid = _server_pid()
    if pid is None:
        recorded = _recorded_port()
        owner = server_owner(recorded) if recorded else None
        if owner is None or owner["home"] is None or Path(owner["home"]).resolve() != ragmem_home().resolve():
            return False
        pid = owner["pid"]
    _pid_file().unlink(missing_ok=True)
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


def resolve_api_url(log=print) -> str:
    """The API URL a flow run should report to (see the module docstring)."""
    return configured_api_url() or ensure_managed_server(log=log).api_url
