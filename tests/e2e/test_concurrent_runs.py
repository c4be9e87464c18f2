"""Many runs at once on a new project (a nightly job that fans out its configs): they share one
MLflow store, created once under a lock, and one Prefect server, started once under a lock; every
run and every example is in the store; ``ragmem server stop`` stops the server that really runs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import outside_env, ROOT

pytestmark = pytest.mark.e2e

RUNS = 8


def _servers_of(home: Path) -> list[int]:
    """The pids of the Prefect servers started with this home (their PREFECT_HOME under it)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if b"server" in words and b"start" in words and f"PREFECT_HOME={home}/prefect".encode() in environ:
            found.append(int(entry.name))
    return found


@pytest.mark.stress  # (a lane of its own: pytest -m stress)
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="counts the Prefect servers through /proc (Linux)")
def test_eight_runs_started_at_once_on_a_new_project_all_finish_with_one_server(tmp_path):
    from mlflow import MlflowClient

    home = tmp_path / ".ragmem"
    rows = json.loads((ROOT / "ragmem" / "datasets" / "demo_bilingual.json").read_text(encoding="utf-8"))[:6]
    (tmp_path / "d.json").write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    # what is under test is starting together, not scoring: six examples, few metrics, no intervals
    (tmp_path / "c.yaml").write_text("experiment: fan-out\ndata: {files: [d.json]}\nstats: {resamples: 0}\n"
                                     "metrics: [pass_rate, token_f1]\ntracking: {max_traces: 0}\n")
    env = outside_env(tmp_path, ("PREFECT_", "MLFLOW_"), RAGMEM_HOME=str(home), RAGMEM_PROGRESS="off")
    started = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-m", "ragmem.cli", "run", "c.yaml", "-o", f"s{i}.json"], cwd=tmp_path,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for i in range(RUNS)]
    try:
        errors = [p.communicate(timeout=420)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    codes = [p.returncode for p in procs]
    print(f"{RUNS} runs at once: {time.monotonic() - started:.0f} s")
    assert codes == [0] * RUNS, [e.strip().splitlines()[-1:] for e in errors]
    assert sum("starting the local Prefect server" in e for e in errors) == 1  # one started it, seven used it
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("fan-out").experiment_id])
    assert len(runs) == RUNS and {r.info.status for r in runs} == {"FINISHED"}
    assert {r.data.metrics["count/n_examples"] for r in runs} == {6.0}
    servers = _servers_of(tmp_path / "server")
    assert len(servers) == 1, servers
    stopped = subprocess.run([sys.executable, "-m", "ragmem.cli", "server", "stop"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0 and _servers_of(tmp_path / "server") == []
    assert not (tmp_path / "server" / "prefect-server.pid").exists()  # the pid file does not outlive its server
