"""The ``ragmem`` command end to end: Prefect flow on a local server, MLflow store read back."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from mlflow import MlflowClient

from tests.conftest import ROOT, api_post, fetch_shared, free_port, run_cli, wait_until

pytestmark = pytest.mark.e2e

EXPECTED_METRICS = {"accuracy", "precision", "recall", "f1", "avg_coverage", "reference_coverage",
                    "avg_latency", "latency_p50", "latency_p95", "latency_p99", "latency_max"}
EXPECTED_PARAMS = {"data.path", "data.sha256", "data.labels", "data.n_examples", "agent.type", "judge.type",
                   "judge.threshold", "judge.signature", "keywords.tokenizer", "keywords.stopwords",
                   "ragmem.version", "metrics", "seed", "zero_division"}


def _task_run_names(api_url, flow_run_id, expected, timeout=180.0):
    """Task runs reach the server asynchronously; wait until the expected number arrived."""
    deadline = time.monotonic() + timeout
    while True:
        runs = api_post(api_url, "/task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run_id]}}})
        if len(runs) >= expected or time.monotonic() > deadline:
            return sorted(r["name"] for r in runs)
        time.sleep(0.5)


def test_run_on_the_two_seed_files(prefect_env, seed_dir, tmp_path):
    fetch_shared("seed-samples", prefect_env)  # as `ragmem data fetch seed-samples` does from GitHub
    done = run_cli(["run", str(ROOT / "configs" / "seed_samples.yaml"), "--output", "out/summary.json"],
                   env=prefect_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout and "CancelledError" not in done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert set(summary) >= {"run_id", "experiment", "n_examples", "n_errors", "metrics", "params"}
    assert summary["n_examples"] == 16 and summary["n_errors"] == 0
    assert EXPECTED_METRICS <= set(summary["metrics"])
    # hand-checked on this data: only one example passes overlap > 0.7 (a label-0 one)
    assert summary["metrics"]["confusion_fp"] == 1 and summary["metrics"]["accuracy"] == pytest.approx(7 / 16)

    client = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    run = client.get_run(summary["run_id"])
    assert run.info.status == "FINISHED"
    assert client.get_experiment(run.info.experiment_id).name == "seed-samples"
    assert EXPECTED_PARAMS <= set(run.data.params)
    assert run.data.params["data.n_examples"] == "16" and run.data.params["data.labels"] == "1;0"
    assert run.data.params["keywords.tokenizer"] == "rjieba"  # the default tokenizer
    for name in ("accuracy", "precision", "recall", "f1", "avg_coverage", "reference_coverage"):
        assert run.data.metrics[name] == pytest.approx(summary["metrics"][name])
    assert run.data.metrics["count/n_latency_measured"] == 0  # replayed without latency_ms: not measured
    assert "avg_latency" not in run.data.metrics           # ...and never logged as a number
    top = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.json", "summary.json", "examples.csv", "examples.json", "agent_outputs.jsonl"} <= top
    plots = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    assert plots == {"plots/confusion_matrix.png"}
    # (MlflowClient.load_table's search does not find tables in a sqlite store; read the artifact)
    table = json.loads(open(client.download_artifacts(run.info.run_id, "examples.json", str(tmp_path))).read())
    assert len(table["data"]) == 16
    assert {"query", "kw_reference", "overlap", "verdict", "coverage", "error"} <= set(table["columns"])

    # every task run of the flow reached the Prefect server
    api_url = f"http://127.0.0.1:{prefect_env['RAGMEM_PREFECT_PORT']}/api"
    names = _task_run_names(api_url, run.data.tags["prefect.flow_run_id"], expected=5)
    assert [n.rsplit("-", 1)[0] for n in names] == \
        ["judge-batch", "load", "log-run", "metrics", "time-agent-batch"]


def test_run_with_a_live_agent_and_overrides(prefect_env, tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(json.dumps({"query": q, "reference_answer": q, "label": 1}, ensure_ascii=False)
                              for q in ["向量数据库存储embedding", "fail here", "BM25 ranks documents"]))
    env = {**prefect_env, "PYTHONPATH": str(ROOT)}
    done = run_cli(["run", str(ROOT / "configs" / "default.yaml"), "--data", str(data),
                    "--set", "agent.type=python", "--set", "agent.target=tests.sample_agents:echo",
                    "--set", "agent.batch_size=2", "--set", "experiment=live"], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["metrics"]["recall"] == 1.0 and summary["metrics"]["n_latency_measured"] == 3
    assert summary["metrics"]["retrieve_latency_avg"] == pytest.approx(0.001)
    assert summary["params"]["agent.target"] == "tests.sample_agents:echo"
    client = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    plots = {a.path for a in client.list_artifacts(summary["run_id"], "plots")}
    assert plots == {"plots/confusion_matrix.png", "plots/latency_histogram.png"}


def test_prefect_api_url_is_honoured(prefect_env, tmp_path):
    api_url = f"http://127.0.0.1:{prefect_env['RAGMEM_PREFECT_PORT']}/api"
    env = {**prefect_env, "PREFECT_API_URL": api_url, "RAGMEM_PREFECT_PORT": str(free_port()),
           "RAGMEM_HOME": str(tmp_path / "home")}
    done = run_cli(["run", str(ROOT / "configs" / "demo.yaml"), "--set", "experiment=remote"],
                   env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "starting a local Prefect server" not in done.stderr and api_url in done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    run = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db").get_run(summary["run_id"])
    flow_run = api_post(api_url, "/flow_runs/filter", {"flow_runs": {"id": {"any_": [run.data.tags["prefect.flow_run_id"]]}}})
    assert flow_run and flow_run[0]["state_type"] == "COMPLETED"


#: a few bad inputs through the real command (a process of its own: its one line, its exit code);
#: the ~100 cases of tests/bad_inputs/cases.yaml run in process (test_bad_inputs.py), among them
#: a bad --set value, an unknown setting, an unknown metric and a bad --label
BAD_INPUT = [
    (["run", "missing.yaml"], "missing.yaml: config file not found"),
    (["run", "{config}"], "data.files: no dataset given"),
    (["run", "{config}", "--data", "{bad}"], "record 2: field 'query': missing"),
    (["run", "{config}", "--data", "{bad}", "--set", "agent.type=python", "--set", "agent.target=nope:f"],
     "agent.target: cannot import module 'nope'"),
]


@pytest.mark.parametrize("args, message", BAD_INPUT)
def test_bad_input_is_one_line_and_exit_2(prefect_env, tmp_path, args, message):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"query": "q", "reference_answer": "r", "generated_answer": "g"},
                               {"reference_answer": "r", "generated_answer": "g"}]))
    args = [a.format(config=ROOT / "configs" / "default.yaml", bad=bad) for a in args]
    done = run_cli(args, env=prefect_env, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("ragmem | ")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_validate(tmp_path, ragmem_main):
    good = tmp_path / "good.csv"
    good.write_text('query,context,generated_answer,reference_answer\nq,"[""c""]",g,r\n')
    done = ragmem_main(["validate", str(good)])
    assert done.returncode == 0 and "1 record, all valid" in done.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "q"}\n{"query": "q", "reference_answer": "r", "generated_answer": "g", "label": 5}\n')
    done = ragmem_main(["validate", str(bad), "--label", "1"])
    assert done.returncode == 2
    problems = [line for line in done.stderr.splitlines() if line.startswith("invalid: ")]
    assert len(problems) == 2 and "record 2: field 'label'" in problems[1]  # (a reference answer is optional)
    assert "2 records, 2 invalid, 2 problems" in done.stderr


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_ui_serves_the_store_on_localhost_in_one_process(tmp_path, sig):
    port = free_port()
    ui = subprocess.Popen([str(Path(sys.executable).parent / "ragmem"), "ui", "--port", str(port)], cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"})
    def healthy():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as reply:
                return reply.status == 200
        except (urllib.error.URLError, OSError):
            return False

    try:
        wait_until(healthy, "ragmem ui", process=ui)
        experiments = api_post(f"http://127.0.0.1:{port}/api/2.0/mlflow", "/experiments/search", {"max_results": 5})
        assert [e["name"] for e in experiments["experiments"]] == ["Default"]
        assert (tmp_path / "mlruns" / "mlflow.db").is_file()
        assert _children(ui.pid) == []  # one process: no supervisor, no job runner
        status = Path(f"/proc/{ui.pid}/status").read_text()
        peak_mb = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) / 1024
        assert peak_mb < 500, f"peak {peak_mb:.0f} MB"
        ui.send_signal(sig)
        sent = time.monotonic()
        output = ui.communicate(timeout=30)[0]
        took = time.monotonic() - sent
    finally:
        if ui.poll() is None:
            ui.kill()
            ui.wait()
    assert took < 3, f"{took:.1f} s to exit after {sig.name}"
    assert ui.returncode == 0 and output.strip().splitlines()[-1] == "MLflow UI stopped", output
    # quiet: our lines and MLflow's security notice; no deprecation warning, no INFO line, no traceback
    assert "Warning" not in output and " INFO" not in output and "Traceback" not in output, output


def test_run_and_the_api_log_the_same_run(prefect_env, tmp_path, monkeypatch):
    """One engine: ``ragmem run`` and ``ragmem.evaluate`` on the same config give equal metrics
    and the same artifact names, the journal included."""
    import ragmem

    done = run_cli(["run", str(ROOT / "configs" / "demo.yaml"), "--output", "cli.json"], env=prefect_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    monkeypatch.chdir(tmp_path)  # the same default store, sqlite:///mlruns/mlflow.db
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("RAGMEM_HOME", prefect_env["RAGMEM_HOME"])
    result = ragmem.evaluate(None, config=ROOT / "configs" / "demo.yaml")
    by_api = {"run_id": result.run_id, "metrics": result.summary["metrics"]}
    by_cli = json.loads((tmp_path / "cli.json").read_text())
    assert by_cli["metrics"] == by_api["metrics"]
    client = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db")

    def artifacts(run_id, path=None):
        found = set()
        for item in client.list_artifacts(run_id, path):
            found |= artifacts(run_id, item.path) if item.is_dir else {item.path}
        return found

    assert artifacts(by_cli["run_id"]) == artifacts(by_api["run_id"])
    assert "agent_outputs.jsonl" in artifacts(by_api["run_id"])
    runs = [client.get_run(by_cli["run_id"]), client.get_run(by_api["run_id"])]
    assert [r.data.tags["ragmem.entry"] for r in runs] == ["flow", "python-api"]
    assert all(r.info.status == "FINISHED" for r in runs)


def test_stop_when_decided_ends_a_run_whose_gate_is_decided_with_its_exit_code(prefect_env, tmp_path):
    """``--stop-when-decided`` through the command and its Prefect flow: a pass rate of 0.9 against
    ``--fail-under pass_rate=0.5`` is decided within 300 of 1,000 examples, exit 0, said in the output
    and in summary.json."""
    data = tmp_path / "sites.jsonl"
    data.write_text("\n".join(json.dumps({"id": f"q{i}", "query": f"where is site {i}?",
                                           "reference_answer": f"site {i} lies north of the river",
                                           "generated_answer": f"site {i} lies north of the river" if i % 10 else "no"})
                               for i in range(1000)), encoding="utf-8")
    done = run_cli(["run", str(ROOT / "configs" / "default.yaml"), "--data", str(data), "--fail-under",
                    "pass_rate=0.5", "--stop-when-decided", "--set", "experiment=decided"], env=prefect_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["decided"]["after"] < 300 and summary["n_examples"] == summary["decided"]["after"]
    assert f"decided after {summary['decided']['after']} of 1,000 examples" in done.stdout + done.stderr
