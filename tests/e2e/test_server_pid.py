"""``ragmem server stop`` signals only the Prefect server ragmem started: the pid file is checked
against the process it names before any signal."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ragmem.orchestration import server as prefect_server
from tests.conftest import run_cli

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
