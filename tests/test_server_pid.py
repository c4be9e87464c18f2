"""``ragmem server stop`` signals only the Prefect server ragmem started: the pid file is checked
against the process it names before any signal."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ragmem import orchestration
from tests.conftest import run_cli


def _bystander():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def test_a_stale_pid_file_is_removed_and_its_number_never_signalled(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    pid_file = tmp_path / "prefect-server.pid"
    bystander = _bystander()
    try:
        # the recorded server is gone and its number now belongs to another process
        pid_file.write_text(json.dumps({"pid": bystander.pid, "identity": "12345"}))
        assert orchestration.stop_managed_server() is False
        assert bystander.poll() is None and not pid_file.exists()
        # an old pid file (a bare number) is trusted only for a process that is a Prefect server
        pid_file.write_text(str(bystander.pid))
        assert orchestration.stop_managed_server() is False
        assert bystander.poll() is None and not pid_file.exists()
        # through the command: one line, exit 0, the bystander untouched
        pid_file.write_text(json.dumps({"pid": bystander.pid, "identity": "1"}))
        done = run_cli(["server", "stop"], env={**os.environ, "RAGMEM_HOME": str(tmp_path)})
        assert done.returncode == 0 and done.stdout.strip() == "no server started by ragmem is running"
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_the_identity_of_a_process_is_its_start_time():
    """Checked right after the start, as the server's is (its command line may still be empty then)."""
    for _ in range(20):
        bystander = _bystander()
        try:
            first = orchestration.process_identity(bystander.pid)
            assert first and orchestration.process_identity(bystander.pid) == first
        finally:
            bystander.kill()
            bystander.wait()
        assert orchestration.process_identity(bystander.pid) is None
    assert "pytest" in orchestration.process_command(os.getpid())  # a command line is readable
