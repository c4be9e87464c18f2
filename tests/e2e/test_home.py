"""Homes and the one local Prefect server: three homes, one run each, use one server process (each
run still in its own home's store), which stops itself once idle; a run that cannot start starts no
server; a run started from a folder below a home lands in that home's store and says where. The
home's logic, in process: tests/runtime/test_home.py; the leases, tests/orchestration/test_idle.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragmem.cli import starter
from ragmem.orchestration import server as prefect_server
from tests.conftest import free_port, outside_env, run_cli, wait_until

pytestmark = pytest.mark.e2e


def _servers(folder: Path) -> list[dict]:
    return [s for s in prefect_server.prefect_servers() if s["prefect_home"] == str(folder / "prefect")]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="counts the Prefect servers through /proc (Linux)")
def test_three_homes_share_one_server_which_stops_once_idle_and_a_refused_run_starts_none(tmp_path):
    server = tmp_path / "server"
    env = outside_env(tmp_path, ("PREFECT_", "MLFLOW_"), RAGMEM_PREFECT_PORT=str(free_port()), RAGMEM_PROGRESS="off")
    homes = [tmp_path / name for name in ("alpha", "beta", "gamma")]
    # a run refused by its checks (a dead agent URL) starts no server
    starter.init_home(homes[0])
    refused = run_cli(["run", "ragmem.yaml", "--set", "agent.type=http", "--set", "agent.url=http://127.0.0.1:9/agent"],
                      env=env, cwd=homes[0])
    assert refused.returncode == 2 and "agent.url http://127.0.0.1:9/agent" in refused.stderr, refused.stderr
    assert _servers(server) == [] and not (server / "prefect-server.pid").exists()
    for i, home in enumerate(homes):
        if i:
            starter.init_home(home)
        idle = 4 if i == 2 else 600  # (the last command to end sets the idle period: a busy machine may take
        # more than 4 s to start the next run)
        done = run_cli(["run", "ragmem.yaml", "-o", "s.json", "--set", f"orchestration.server_idle_s={idle}"],
                       env=env, cwd=home)
        assert done.returncode == 0, done.stderr
        assert ("starting the local Prefect server" in done.stderr) is (i == 0), done.stderr
        assert len(_servers(server)) == 1  # one server, whichever home runs
        summary = json.loads((home / "s.json").read_text())
        assert Path(summary["tracking_uri"].removeprefix("sqlite:///")) == (home / "mlruns" / "mlflow.db").resolve()
        if i == 1:  # between runs: idle, and when it will stop
            status = run_cli(["server", "status"], env={**env, "COLUMNS": "400"}, cwd=homes[0])
            assert f"local server http://127.0.0.1:{env['RAGMEM_PREFECT_PORT']}/api: running, pid " in status.stdout
            assert "shared by every ragmem home" in status.stdout and " min unless a command uses it" in status.stdout, \
                status.stdout  # (600 s: "idle; stops itself in 10 min unless a command uses it")
    # four seconds after the last run ended, the watcher stops it
    stopped = "idle watcher: stopped the server: no command used it for 4 s"
    wait_until(lambda: stopped in (server / "prefect-server.log").read_text(errors="replace"), "the idle server to stop",
               timeout=120)
    assert _servers(server) == [] and not (server / "prefect-server.pid").exists()
    after = run_cli(["server", "status"], env=env, cwd=homes[2])
    assert "not running (started by the next run" in after.stdout


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
