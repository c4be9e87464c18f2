"""Runs that survive faults: interrupted and killed runs resumed, dead endpoints, stuck agents.

The end-to-end cases drive ``ragmem`` as a subprocess against a local Prefect server and count
the agent's calls in a file (``tests.sample_agents:slow_logged``), so "nothing paid twice" is a count.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from tests.conftest import ROOT, wait_until

N = 300


def _write_data(folder: Path, n: int = N) -> Path:
    path = folder / "data.json"
    path.write_text(json.dumps([{"id": f"q{i}", "query": f"question {i}", "reference_answer": f"question {i}"}
                                for i in range(n)]))
    return path


def _config(folder: Path, concurrency: int = 4, extra: str = "") -> Path:
    path = folder / "slow.yaml"
    path.write_text(f"""experiment: faults
data:
  files: [data.json]
agent:
  type: python
  target: tests.sample_agents:slow_logged
  concurrency: {concurrency}
  batch_size: 50
tracking:
  max_traces: 0
{extra}""")
    return path


def _calls(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.is_file() else []


def _start(args, env, cwd) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ragmem.cli", *args], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _examples_ids(client: MlflowClient, run_id: str, tmp: Path) -> list[str]:
    table = json.loads(Path(client.download_artifacts(run_id, "examples.json", str(tmp))).read_text())
    return [row[table["columns"].index("id")] for row in table["data"]]


@pytest.mark.e2e
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"])
def test_an_interrupted_run_resumes_without_paying_twice(prefect_env, tmp_path, sig):
    _write_data(tmp_path)
    config = _config(tmp_path)
    calls = tmp_path / "calls.txt"
    env = {**prefect_env, "PYTHONPATH": str(ROOT), "RAGMEM_TEST_CALLS": str(calls), "RAGMEM_TEST_DELAY": "0.05"}
    proc = _start(["run", str(config)], env, tmp_path)
    wait_until(lambda: len(_calls(calls)) >= 100, "100 agent calls", process=proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    client = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("faults").experiment_id])
    run_id = run.info.run_id
    journal = Path(env["RAGMEM_HOME"]) / "runs" / run_id / "agent_outputs.jsonl"
    journaled = len(journal.read_text().splitlines())
    if sig == signal.SIGINT:
        assert proc.returncode == 130, err
        assert "Traceback" not in err and "Crash detected" not in err
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"interrupted: {journaled} of {N} examples done; resume with: ragmem run ")
        assert last.endswith(f"--resume {run_id}")
        assert run.info.status == "KILLED"
        assert journaled >= 100
    else:
        assert proc.returncode == -signal.SIGKILL
        assert run.info.status == "RUNNING"  # nobody could end it ...
        listed = subprocess.run([sys.executable, "-m", "ragmem.cli", "compare", "-e", "faults"], env={**env, "COLUMNS": "200"},
                                cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert "DEAD" in listed.stdout, listed.stdout + listed.stderr  # ... but it is recognised as dead
        assert journaled >= 90  # per output, flushed: at most the calls in flight were lost

    resumed = subprocess.run([sys.executable, "-m", "ragmem.cli", "run", str(config), "--resume", run_id],
                             env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming {run_id}: {journaled} of {N} examples already answered" in resumed.stderr
    made = _calls(calls)
    assert len(made) <= N + 4, len(made)          # at most agent.concurrency calls made twice
    assert set(made) == {f"question {i}" for i in range(N)}
    final = client.get_run(run_id)
    assert final.info.status == "FINISHED"
    assert final.data.tags["ragmem.resumed"] == "1" and "ragmem.error" not in final.data.tags
    ids = _examples_ids(client, run_id, tmp_path)
    assert len(ids) == N and len(set(ids)) == N
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["run_id"] == run_id and summary["n_examples"] == N and summary["n_errors"] == 0
