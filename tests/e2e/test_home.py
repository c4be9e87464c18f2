"""Homes with real Prefect servers: two homes each start and use their own, and a run started from a
folder below a home lands in that home's store and says where. The home's logic, in process:
tests/runtime/test_home.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ragmem.cli import starter
from ragmem.orchestration import server as prefect_server
from tests.conftest import free_port, run_cli, wait_until

pytestmark = pytest.mark.e2e


@pytest.mark.e2e  # two real Prefect servers
def test_two_homes_each_use_their_own_prefect_server(tmp_path):
    """Home B finds home A's server on the port B recorded: B starts its own on another port, and
    ``server status`` in each names its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAGMEM_HOME", "RAGMEM_PREFECT_PORT", "PREFECT_API_URL")}
    homes = [tmp_path / "a", tmp_path / "b"]
    port = free_port()
    try:
        for folder in homes:
            starter.init_home(folder)
            (folder / ".ragmem").mkdir()
            (folder / ".ragmem" / "prefect-port").write_text(f"{port}\n")  # both would take the same port
        first = subprocess.Popen([sys.executable, "-m", "ragmem.cli", "server", "start"], cwd=homes[0], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # home B starts once A's server holds the port (A's own start goes on meanwhile)
        wait_until(lambda: prefect_server.server_owner(port) is not None, "home A's server process", process=first)
        done = subprocess.run([sys.executable, "-m", "ragmem.cli", "server", "start"], cwd=homes[1], env=env,
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr
        assert first.wait(timeout=240) == 0, first.communicate()[1]
        ports = [int((f / ".ragmem" / "prefect-port").read_text()) for f in homes]
        assert ports[0] == port and ports[1] != port
        for folder, own in zip(homes, ports):
            wait_until(lambda: prefect_server.healthy(f"http://127.0.0.1:{own}/api"), f"the server of {folder}")
            status = run_cli(["server", "status"], env={**env, "COLUMNS": "400"}, cwd=folder / "data")  # from below
            assert status.returncode == 0, status.stderr
            line = " ".join(status.stdout.split())
            assert f"http://127.0.0.1:{own}/api: running" in line
            assert f"with this ragmem home ({(folder / '.ragmem').resolve()})" in line
    finally:
        for folder in homes:
            subprocess.run([sys.executable, "-m", "ragmem.cli", "server", "stop"], cwd=folder, env=env,
                           capture_output=True, text=True, timeout=60)


@pytest.mark.e2e  # a whole run through the command, against the session's Prefect server
def test_a_run_from_a_folder_below_lands_in_the_home_and_says_where(tmp_path, prefect_env):
    starter.init_home(tmp_path / "proj")
    below = tmp_path / "proj" / "notebooks" / "today"
    below.mkdir(parents=True)
    env = {k: v for k, v in prefect_env.items() if k != "MLFLOW_TRACKING_URI"}
    done = run_cli(["run", "ragmem.yaml", "-o", "summary.json"], env=env, cwd=below)
    assert done.returncode == 0, done.stderr
    store = f"sqlite:///{(tmp_path / 'proj' / 'mlruns' / 'mlflow.db').resolve()}"
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("MLflow run ") and f"; stored in {store}; report: ragmem report " in last, last
    assert (tmp_path / "proj" / "mlruns" / "mlflow.db").is_file()
    assert sorted(p.name for p in below.iterdir()) == ["summary.json"]  # no mlruns/ or .ragmem/ here
    assert not (tmp_path / "proj" / "notebooks" / "mlruns").exists()
