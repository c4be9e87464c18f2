"""``ragmem server stop`` signals only the Prefect server ragmem started: the pid file is checked
against the process it names before any signal."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from ragmem.orchestration import server as prefect_server
from tests.conftest import ROOT, free_port, run_cli, wait_until

pytestmark = pytest.mark.e2e  # real processes of their own: subprocesses


def _bystander():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


@pytest.mark.e2e  # a real process of its own: a subprocess
def test_a_stale_pid_file_is_removed_and_its_number_never_signalled(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RAGMEM_SERVER_HOME", str(tmp_path / "server"))
    (tmp_path / "server").mkdir()
    (tmp_path / "home").mkdir()
    pid_file = tmp_path / "server" / "prefect-server.pid"
    legacy = tmp_path / "home" / "prefect-server.pid"  # an older ragmem's per-home server
    bystander = _bystander()
    try:
        legacy.write_text(str(bystander.pid))  # a bare number that names no Prefect server: removed, not signalled
        assert prefect_server.stop_managed_server() is False
        assert bystander.poll() is None and not legacy.exists()
        # the recorded server is gone and its number now belongs to another process
        pid_file.write_text(json.dumps({"pid": bystander.pid, "identity": "12345"}))
        assert prefect_server.stop_managed_server() is False
        assert bystander.poll() is None and not pid_file.exists()
        # an old pid file (a bare number) is trusted only for a process that is a Prefect server
        pid_file.write_text(str(bystander.pid))
        assert prefect_server.stop_managed_server() is False
        assert bystander.poll() is None and not pid_file.exists()
        # through the command: one line, exit 0, the bystander untouched
        pid_file.write_text(json.dumps({"pid": bystander.pid, "identity": "1"}))
        done = run_cli(["server", "stop"], env={**os.environ, "RAGMEM_HOME": str(tmp_path / "home"),
                                                "RAGMEM_SERVER_HOME": str(tmp_path / "server")})
        assert done.returncode == 0 and done.stdout.strip() == "no local Prefect server of ragmem is running"
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.e2e  # real processes: subprocesses
def test_the_identity_of_a_process_is_its_start_time():
    """Checked right after the start, as the server's is (its command line may still be empty then)."""
    for _ in range(20):
        bystander = _bystander()
        try:
            first = prefect_server.process_identity(bystander.pid)
            assert first and prefect_server.process_identity(bystander.pid) == first
        finally:
            bystander.kill()
            bystander.wait()
        assert prefect_server.process_identity(bystander.pid) is None
    assert os.path.basename(sys.executable) in prefect_server.process_command(os.getpid())  # a command line is readable
    # (by its name: run as .venv/bin/python, the command line holds the relative path)


@pytest.mark.e2e
def test_status_shows_the_one_server_from_any_home(prefect_env, tmp_path, ragmem_main):
    # the status command in this process (its main()), against the session's real server
    port = prefect_env["RAGMEM_PREFECT_PORT"]
    folder = os.path.realpath(prefect_env["RAGMEM_SERVER_HOME"])
    for home in (prefect_env["RAGMEM_HOME"], str(tmp_path / "other")):
        shown = ragmem_main(["server", "status"], env={**prefect_env, "RAGMEM_HOME": home, "COLUMNS": "400"}, cwd=tmp_path)
        text = " ".join(shown.stdout.split())
        assert shown.returncode == 0 and f"local server http://127.0.0.1:{port}/api: running, pid " in text
        assert f"shared by every ragmem home (its folder: {folder})" in text, text


def _fake_server(folder, port: int, *extra: str) -> subprocess.Popen:
    """A process that reads as the shared server of ``folder`` on ``port`` (tests/fake_prefect_server.py)."""
    env = {**os.environ, "PREFECT_HOME": str(folder / "prefect")}
    fake = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fake_prefect_server.py"), "prefect", "server",
                             "start", "--port", str(port), *extra], env=env, start_new_session=True)
    wait_until(lambda: prefect_server.healthy(f"http://127.0.0.1:{port}/api"), "the fake server", process=fake)
    return fake


@pytest.mark.e2e  # real processes: a stand-in server, the CLI
def test_a_server_without_its_pid_file_is_found_by_status_and_stop_and_killed_if_it_ignores_sigterm(tmp_path):
    """Issue 60, point 8: the pid file lost or overwritten (another start over a slow server), the
    server listening on the managed port is still found; one that outlives SIGTERM is killed, and
    ``stop`` says stopped only once its process is gone."""
    port = free_port()
    env = {**os.environ, "RAGMEM_HOME": str(tmp_path / "home"), "RAGMEM_SERVER_HOME": str(tmp_path / "server"),
           "RAGMEM_PREFECT_PORT": str(port)}
    env.pop("PREFECT_API_URL", None)
    (tmp_path / "server").mkdir()
    fake = _fake_server(tmp_path / "server", port, "--ignore-sigterm")
    try:
        assert not (tmp_path / "server" / "prefect-server.pid").exists()
        shown = run_cli(["server", "status"], env={**env, "COLUMNS": "400"})
        assert shown.returncode == 0 and f"/api: running, pid {fake.pid}," in shown.stdout, shown.stdout
        began = time.monotonic()
        stopped = run_cli(["server", "stop"], env=env)
        assert stopped.returncode == 0 and stopped.stdout.strip() == "stopped", stopped.stderr
        assert fake.poll() is not None and fake.returncode == -signal.SIGKILL  # SIGTERM ignored: killed
        assert time.monotonic() - began >= prefect_server.STOP_GRACE_S
        with pytest.raises(ConnectionRefusedError):  # nothing listens on the port any more
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        fake.kill()
        fake.wait()


@pytest.mark.e2e  # real processes: a stand-in server, the watcher
def test_the_idle_watcher_records_the_server_stopped_only_once_its_process_is_gone(tmp_path):
    port = free_port()
    folder = tmp_path / "server"
    folder.mkdir()
    env = {**os.environ, "RAGMEM_HOME": str(tmp_path / "home"), "RAGMEM_SERVER_HOME": str(folder),
           "RAGMEM_PREFECT_PORT": str(port)}
    fake = _fake_server(folder, port, "--ignore-sigterm")
    try:
        watcher = subprocess.run([sys.executable, "-m", "ragmem.orchestration.watcher", str(folder), "0.5"],
                                 env=env, cwd=ROOT, timeout=120)
        assert watcher.returncode == 0
        log = (folder / "prefect-server.log").read_text()
        assert "idle watcher: stopped the server: no command used it for 0.5 s" in log, log
        assert fake.poll() == -signal.SIGKILL  # (gone when the line was written: the watcher waited for it)
    finally:
        fake.kill()
        fake.wait()
