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
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    pid_file = tmp_path / "prefect-server.pid"
    bystander = _bystander()
    try:
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
        done = run_cli(["server", "stop"], env={**os.environ, "RAGMEM_HOME": str(tmp_path)})
        assert done.returncode == 0 and done.stdout.strip() == "no server started by this ragmem home is running"
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
def test_status_names_the_home_and_checkout_that_started_the_server(prefect_env, tmp_path, ragmem_main):
    # the status and stop commands in this process (their main()), against the session's real server
    here = ragmem_main(["server", "status"], env=prefect_env, cwd=tmp_path)
    port = prefect_env["RAGMEM_PREFECT_PORT"]
    home = os.path.realpath(prefect_env["RAGMEM_HOME"])
    assert here.returncode == 0 and f"local server http://127.0.0.1:{port}/api: running, pid " in here.stdout
    assert f"with this ragmem home ({home})" in " ".join(here.stdout.split()), here.stdout
    other = ragmem_main(["server", "status"], env={**prefect_env, "RAGMEM_HOME": str(tmp_path / "other")}, cwd=tmp_path)
    text = " ".join(other.stdout.split())
    assert f"with another ragmem home ({home})" in text and "ragmem server stop stops only a server this home started" in text
    stop = ragmem_main(["server", "stop"], env={**prefect_env, "RAGMEM_HOME": str(tmp_path / "other")}, cwd=tmp_path)
    assert stop.stdout.strip() == "no server started by this ragmem home is running"  # and it still runs:
    assert "running, pid" in ragmem_main(["server", "status"], env=prefect_env, cwd=tmp_path).stdout
