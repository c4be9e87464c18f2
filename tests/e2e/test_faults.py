"""Runs that survive faults, end to end: ``ragmem`` as a subprocess against a local Prefect server,
interrupted (SIGINT) or killed (SIGKILL) and resumed without paying twice, dead endpoints, a stuck
agent call, the Prefect server or the tracking server lost mid-run. The agent's calls are counted in
a file (``tests.sample_agents:slow_logged``), so "nothing paid twice" is a count. The same faults in
process: tests/run/test_faults.py."""

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
from tests.run.test_faults import N, _calls, _replayed, _write_data

pytestmark = pytest.mark.e2e


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
        assert last.startswith(f"interrupted: {journaled} of {N} examples answered; resume with: ragmem run ")
        assert last.endswith(f"--resume {run_id}")
        assert run.info.status == "KILLED"
        assert journaled >= 100
    else:
        assert proc.returncode == -signal.SIGKILL
        assert run.info.status == "RUNNING"  # nobody could end it ...
        listed = subprocess.run([sys.executable, "-m", "ragmem.cli", "compare", "-e", "faults"], env={**env, "COLUMNS": "200"},
                                cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert "DEAD" in listed.stdout, listed.stdout + listed.stderr  # ... but it is recognised as dead
        assert journaled >= 90  # per output, written by the worker that got it: at most the calls in flight were lost

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


def _cli(args, env, cwd, timeout=300):
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "ragmem.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - started


@pytest.mark.e2e
def test_dead_endpoints_end_the_command_at_once_with_one_line(prefect_env, tmp_path, ragmem_main):
    # the command's main() in this process, against the shared server (the exit of a real `ragmem`
    # process on a dead endpoint is test_interrupts' judge-hangs case and test_bad_inputs')
    def _cli(args, env, cwd):
        started = time.monotonic()
        return ragmem_main(args, env=env, cwd=cwd), time.monotonic() - started

    data = _replayed(tmp_path, 8)
    judge = ["--set", "judge.type=llm", "--set", "judge.model=m", "--set", "judge.base_url=http://127.0.0.1:9/v1",
             "--set", "metrics=[accuracy]"]
    done, seconds = _cli(["run", str(ROOT / "configs" / "default.yaml"), "--data", data, *judge], prefect_env, tmp_path)
    assert done.returncode == 2 and seconds < 30, (done.returncode, seconds)
    assert done.stderr.strip().splitlines()[-1] == ("error: judge.base_url http://127.0.0.1:9/v1: cannot connect "
                                                   "(Connection refused); nothing was run (--no-preflight skips this check)")
    assert "Traceback" not in done.stderr
    # the tracking server
    env = {**prefect_env, "MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}
    done, seconds = _cli(["run", str(ROOT / "configs" / "default.yaml"), "--data", data], env, tmp_path)
    assert done.returncode == 2 and seconds < 30
    assert done.stderr.strip().splitlines()[-1].startswith("error: tracking.uri http://127.0.0.1:9: cannot connect")
    # without the preflight the breaker stops it, resumably, with exit 3
    done, seconds = _cli(["run", str(ROOT / "configs" / "default.yaml"), "--data", data, *judge, "--no-preflight"],
                         prefect_env, tmp_path)
    assert done.returncode == 3 and seconds < 60, (done.returncode, seconds, done.stderr)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: judge.base_url http://127.0.0.1:9/v1: 5 consecutive failures")
    assert "; resume with: ragmem run " in last and "Traceback" not in done.stderr
    # named at its first failure, while it was retried (not only when the breaker opened)
    assert "judge.base_url http://127.0.0.1:9/v1: 1 request failed (last: cannot connect" in done.stderr
    assert any(line.endswith("; retrying") for line in done.stderr.splitlines())


@pytest.mark.e2e
def test_a_stuck_agent_call_does_not_hold_the_exit(prefect_env, tmp_path):
    data = tmp_path / "data.json"
    data.write_text(json.dumps([{"id": f"q{i}", "query": "hang" if i == 2 else f"question {i}", "reference_answer": "x"}
                                for i in range(12)]))
    config = _config(tmp_path, concurrency=2)
    env = {**prefect_env, "PYTHONPATH": str(ROOT), "RAGMEM_TEST_CALLS": str(tmp_path / "calls.txt"),
           "RAGMEM_TEST_DELAY": "0.01"}
    done, seconds = _cli(["run", str(config), "--set", "agent.timeout_s=2"], env, tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert seconds < 60  # the call sleeps 10,000 s: the process did not wait for it
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["counts"]["n_agent_errors"] == 1 and summary["n_examples"] == 12


@pytest.mark.e2e
def test_losing_the_prefect_server_mid_run_still_writes_the_summary(tmp_path):
    from tests.conftest import start_managed_server

    _write_data(tmp_path)
    config = _config(tmp_path)
    calls = tmp_path / "calls.txt"
    # (0.2 s a call, 4 at once: the 240 calls after the stop take 12 s, longer than the stop itself, SIGTERM
    # then SIGKILL after 5 s, on a busy machine: the run must outlive its server to test what it does then)
    env = start_managed_server(tmp_path / "home", PYTHONPATH=str(ROOT), RAGMEM_TEST_CALLS=str(calls),
                               RAGMEM_TEST_DELAY="0.2")
    proc = _start(["run", str(config)], env, tmp_path)
    try:
        wait_until(lambda: len(_calls(calls)) >= 60, "60 agent calls", process=proc)
        stopped = subprocess.run([sys.executable, "-m", "ragmem.cli", "server", "stop"], env=env,
                                 capture_output=True, text=True, timeout=120)
        assert stopped.stdout.strip() == "stopped"
        killed_at = time.monotonic()
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    journal = next((tmp_path / "home" / "runs").iterdir()) / "agent_outputs.jsonl"
    work_done = journal.stat().st_mtime  # the last answer; the work after it takes seconds
    assert proc.returncode == 0, err
    assert time.monotonic() - killed_at < 120
    assert "Traceback" not in err and "failed to process item" not in err
    assert "stopped answering during the run; the results are complete" in err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["n_examples"] == N
    client = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    assert client.get_run(summary["run_id"]).info.status == "FINISHED"
    after_work = (tmp_path / "summary.json").stat().st_mtime - work_done
    print(f"exit {time.monotonic() - killed_at:.1f} s after the server stopped, summary {after_work:.1f} s after the work")
    assert after_work < 60


@pytest.mark.e2e
def test_the_prefect_server_killed_while_the_judge_works_ends_the_run_with_exit_0(tmp_path):
    """Issue 60, point 8: the server dies (SIGKILL, no goodbye) while the judge's requests are under way;
    the run goes on without it and ends with its true result, the flow run said to be unrecorded."""
    from tests.conftest import start_managed_server, write_replayed
    from tests.openai_stub import Stub, verdict_by_answer

    write_replayed(tmp_path, 200)
    with Stub(chat=verdict_by_answer, latency_s=0.1) as stub:
        (tmp_path / "judged.yaml").write_text(f"""experiment: killed-while-judging
data: {{files: [replayed.json]}}
agent: {{type: replay}}
judge: {{type: llm, model: m, base_url: "{stub.base_url}", max_concurrency: 2, retry_backoff_s: 0.01}}
metrics: [answer_correctness]
""")
        env = start_managed_server(tmp_path / "home")
        proc = _start(["run", "judged.yaml"], env, tmp_path)
        try:
            wait_until(lambda: len(stub.requests) >= 30, "30 judge requests", process=proc)
            server = json.loads((tmp_path / "home" / "server" / "prefect-server.pid").read_text())["pid"]
            os.killpg(server, signal.SIGKILL)
            killed_at, asked = time.monotonic(), len(stub.requests)
            out, err = proc.communicate(timeout=300)
        finally:
            proc.kill()
    assert asked < 200 and proc.returncode == 0, err
    assert "Traceback" not in err and "internal error" not in err
    assert "stopped answering during the run; the results are complete" in err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["n_examples"] == 200 and summary["metrics"]["judge_calls"] == 200
    assert summary["metrics"]["judge_failures"] == 0 and len(stub.requests) == 200
    client = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    assert client.get_run(summary["run_id"]).info.status == "FINISHED"
    print(f"killed after {asked} of 200 requests; exit 0 {time.monotonic() - killed_at:.1f} s later")


@pytest.mark.e2e
def test_a_tracking_server_dying_before_the_results_are_logged_keeps_them_local(prefect_env, tmp_path):
    from tests.conftest import mlflow_server

    with mlflow_server(tmp_path) as (url, server):
        _write_data(tmp_path)
        config = _config(tmp_path)
        env = {**prefect_env, "PYTHONPATH": str(ROOT), "RAGMEM_TEST_CALLS": str(tmp_path / "calls.txt"),
               "RAGMEM_TEST_DELAY": "0.02", "MLFLOW_TRACKING_URI": url,
               "RAGMEM_HOME": str(tmp_path / "home"),
               # a user's own bound on MLflow's retries (ragmem's default allows about 30 s a request):
               # the same ending, sooner
               "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}
        proc = _start(["run", str(config)], env, tmp_path)
        journal = lambda: list((tmp_path / "home" / "runs").glob("*/agent_outputs.jsonl"))  # noqa: E731
        wait_until(lambda: journal() and len(journal()[0].read_text().splitlines()) >= N, "every answer", process=proc)
        os.killpg(server.pid, signal.SIGKILL)
        stopped_at = time.monotonic()
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, err
    assert time.monotonic() - stopped_at < 120
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"error: tracking.uri {url}: the tracking store stopped answering")
    assert "the results are kept in " in last and "; resume with: ragmem run " in last
    assert "Traceback" not in err and "Retrying" not in err
    summary = json.loads((tmp_path / "summary.json").read_text())  # --output, written all the same
    assert summary["n_examples"] == N
    assert (journal()[0].parent / "summary.json").is_file()
