"""Production traffic on a schedule (``ragmem serve`` of a traces config: ``data.traces.incremental``):
three windows of traces written between runs of the served deployment. Each window's run evaluates
exactly the traces that arrived since the last one ended; a window whose run was stopped mid-way is
resumed by the next scheduled run without a judge request sent twice; each window is compared with
the previous one by an unpaired test, with its interval; a gate on a drop leaves the flow run Failed,
with the reason."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
from collections import Counter

import pytest
from mlflow import MlflowClient

from tests import traffic
from tests.conftest import api_get, run_cli, wait_until
from tests.openai_stub import Stub

pytestmark = pytest.mark.e2e


def _verdict(request: dict) -> str:
    wrong = "WRONG" in json.dumps(request)
    return json.dumps({"verdict": "no" if wrong else "yes", "reason": "made up" if wrong else "supported"})


def _summary(client: MlflowClient, run_id: str) -> dict:
    return json.loads(open(client.download_artifacts(run_id, "summary.json")).read())


def test_three_windows_each_judged_once_compared_unpaired_and_a_drop_fails_the_flow_run(prefect_env, tmp_path):
    app = f"sqlite:///{tmp_path / 'app.db'}"
    store = f"sqlite:///{tmp_path / 'eval.db'}"
    api_url = f"http://127.0.0.1:{prefect_env['RAGMEM_PREFECT_PORT']}/api"
    env = {**prefect_env, "RAGMEM_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "x"}
    with Stub(chat=_verdict) as stub:
        config = tmp_path / "traffic.yaml"
        config.write_text(f"""experiment: traffic-eval
data:
  traces: {{experiment: app, tracking_uri: "{app}", since: 6h, lag: 0s}}
judge: {{type: llm, model: m, base_url: "{stub.base_url}", max_concurrency: 2, retry_backoff_s: 0.01}}
metrics: [pass_rate]
gates:
  pass_rate: {{max_regression: 0.05}}
stats: {{resamples: 300}}
tracking: {{uri: "{store}", max_traces: 0}}
""")
        traffic.write_mlflow(app, "app", traffic.plan(24, raised=2))  # window 1: the last hours' traffic
        serve = subprocess.Popen([sys.executable, "-m", "ragmem.cli", "serve", str(config), "--cron", "0 0 1 1 *",
                                  "--name", "traffic-test"], env=env, cwd=tmp_path,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            def deployed():
                try:
                    return api_get(api_url, "/deployments/name/ragmem-evaluate/traffic-test")
                except urllib.error.HTTPError:
                    return None

            deployment = wait_until(deployed, "deployment ragmem-evaluate/traffic-test", process=serve)
            assert deployment["parameters"]["config"]["data"]["traces"]["incremental"] is True

            def window() -> tuple[str, dict]:
                triggered = run_cli(["trigger", "traffic-test"], env=env, cwd=tmp_path)
                assert triggered.returncode == 0, triggered.stderr
                flow_run = re.search(r"\(([0-9a-f-]{36})\)", triggered.stdout).group(1)

                def ended():
                    state = api_get(api_url, f"/flow_runs/{flow_run}")
                    return state if state["state_type"] in ("COMPLETED", "FAILED", "CRASHED") else None

                return flow_run, wait_until(ended, "the window's flow run", timeout=300, process=serve)

            client = MlflowClient(store)

            def run_of(flow_run: str):
                runs = client.search_runs([client.get_experiment_by_name("traffic-eval").experiment_id],
                                          filter_string=f"tags.`prefect.flow_run_id` = '{flow_run}'")
                assert len(runs) == 1
                return runs[0]

            first_flow, state = window()
            assert state["state_type"] == "COMPLETED", state
            first = run_of(first_flow)
            one = _summary(client, first.info.run_id)
            assert one["traces"]["evaluated"] == 24 and one["traces"]["failed"] == 2
            assert one["traces"]["previous"] is None and one["gates"][0]["passed"]

            traffic.write_mlflow(app, "app", traffic.plan(16, raised=0, start_ns=time.time_ns(), step_ns=10**6, first=24))
            second_flow, state = window()
            assert state["state_type"] == "COMPLETED", state
            two = _summary(client, run_of(second_flow).info.run_id)
            assert two["traces"]["evaluated"] == 16  # exactly the new ones
            assert two["traces"]["window"]["since"] == one["traces"]["window"]["until"]
            previous = two["traces"]["previous"]
            assert previous["run_id"] == first.info.run_id and previous["test"].startswith("unpaired")
            rate = next(r for r in previous["rows"] if r["metric"] == "pass_rate")
            assert rate["n_a"] == 24 and rate["n_b"] == 16 and rate["ci_low"] <= rate["diff"] <= rate["ci_high"]

            # window 3: most answers wrong; its run stopped mid-way (SIGTERM), then resumed by the next window
            traffic.write_mlflow(app, "app", traffic.plan(40, raised=0, start_ns=time.time_ns(), step_ns=10**6, wrong=30,
                                                           first=40))
            sent = len(stub.requests)
            stub.latency_s = 0.1  # (slow enough to be stopped mid-window)
            stopped = subprocess.Popen([sys.executable, "-m", "ragmem.cli", "run", str(config), "--set",
                                        "data.traces.incremental=true"], env=env, cwd=tmp_path,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            wait_until(lambda: len(stub.requests) - sent >= 12, "12 judge requests of window 3", process=stopped)
            stopped.send_signal(signal.SIGTERM)
            _, err = stopped.communicate(timeout=120)
            assert stopped.returncode == 143, err
            _, state = window()
            assert state["state_type"] == "FAILED", state
            assert state["state"]["message"].startswith("gate failed: pass_rate "), state["state"]
            assert "worse by more than max_regression 0.05" in state["state"]["message"]
            runs = client.search_runs([client.get_experiment_by_name("traffic-eval").experiment_id],
                                      order_by=["attributes.start_time DESC"])
            assert len(runs) == 3  # the stopped window's run resumed, not a fourth
            third = runs[0]
            assert third.info.status == "FINISHED" and third.data.tags.get("ragmem.resumed") == "1"
            three = _summary(client, third.info.run_id)
            assert three["traces"]["evaluated"] == 40 and three["traces"]["previous"]["run_id"] == run_of(second_flow).info.run_id
            assert three["traces"]["window"]["since"] == two["traces"]["window"]["until"]
            asked = Counter(json.dumps(r, sort_keys=True) for r in stub.requests[sent:])
            # every window-3 verdict requested once over the two runs: the stopped one and the one that resumed it
            again = [json.loads(k)["messages"][-1]["content"][:300] for k, v in asked.items() if v > 1]
            assert len(asked) == 40 and max(asked.values()) == 1, (again, err[-3000:])
        finally:
            serve.terminate()
            serve.wait(timeout=30)
