"""A sustained drop that no single window can show, caught across windows (``gates.<metric>.drift``):
three windows of traffic at a pass rate of 0.9 (10 sessions each), then a served deployment whose
scheduled window falls to 0.4; the flow run is Failed on the drift line, each window's run carries
its sessions for the windows after it, and ``ragmem serve`` says what the last window could detect
against the ``max_regression`` threshold."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from mlflow import MlflowClient

import ragmem
from tests import traffic
from tests.conftest import api_get, run_cli, wait_until
from tests.openai_stub import Stub

pytestmark = pytest.mark.e2e


def _verdict(request: dict) -> str:
    wrong = "WRONG" in json.dumps(request)
    return json.dumps({"verdict": "no" if wrong else "yes", "reason": "made up" if wrong else "supported"})


def _write_window(app: str, number: int, wrong: int) -> None:
    """20 traces in 10 sessions of this window, the first ``wrong`` of them answering WRONG."""
    planned = traffic.plan(20, raised=0, start_ns=time.time_ns(), step_ns=10**6, wrong=wrong, first=20 * number)
    for p in planned:
        p.session = f"w{number}-s{p.index % 10}"
    traffic.write_mlflow(app, "app", planned)


class _Hook(BaseHTTPRequestHandler):
    """A JSON webhook (Apprise's json://): every message received, kept."""

    received: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        type(self).received.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):  # (quiet)
        pass


def test_a_drop_across_windows_fails_the_scheduled_flow_run_on_the_drift_line(prefect_env, tmp_path, monkeypatch):
    """... and alerts reach a webhook: one message per failed gate of the scheduled window, naming the
    metric, its value and interval, and the threshold; ``ragmem alerts test`` delivers one."""
    app = f"sqlite:///{tmp_path / 'app.db'}"
    store = f"sqlite:///{tmp_path / 'eval.db'}"
    api_url = f"http://127.0.0.1:{prefect_env['RAGMEM_PREFECT_PORT']}/api"
    env = {**prefect_env, "RAGMEM_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "x"}
    for name in ("RAGMEM_HOME", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, env[name])
    hook = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    _Hook.received = []
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    with Stub(chat=_verdict) as stub:
        config = tmp_path / "traffic.yaml"
        config.write_text(f"""experiment: traffic-drift
data:
  traces: {{experiment: app, tracking_uri: "{app}", since: 6h, incremental: true, lag: 0s}}
judge: {{type: llm, model: m, base_url: "{stub.base_url}", max_concurrency: 2, retry_backoff_s: 0.01}}
metrics: [pass_rate]
gates:
  pass_rate: {{max_regression: 0.05, drift: {{max_drop: 0.2}}}}
stats: {{resamples: 300}}
tracking: {{uri: "{store}", max_traces: 0}}
alerts: {{to: ["json://127.0.0.1:{hook.server_address[1]}/hook"]}}
""")
        client = MlflowClient(store)
        for number in range(3):  # the baseline: three nights at 0.9, run in this process
            _write_window(app, number, wrong=2)
            result = ragmem.evaluate(config=str(config))
            drift = result.summary["traces"]["drift"]["pass_rate"]
            assert drift["windows"] == number + 1 and drift["window"][0] == 10  # its 10 sessions
            assert [g["passed"] for g in result.summary["gates"]] == [True, True]
            tagged = json.loads(client.get_run(result.run_id).data.tags["ragmem.traces.drift"])
            assert tagged["pass_rate"][:2] == [10, pytest.approx(0.9)]
        volume = result.summary["traces"]["volume"]
        assert volume["units"] == 10 and volume["unit"] == "sessions" and volume["min_detectable"]["pass_rate"] > 0.05

        _write_window(app, 3, wrong=12)  # the fourth night: 0.4
        serve = subprocess.Popen([sys.executable, "-m", "ragmem.cli", "serve", str(config), "--cron", "0 0 1 1 *",
                                  "--name", "drift-test"], env=env, cwd=tmp_path,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            def deployed():
                try:
                    return api_get(api_url, "/deployments/name/ragmem-evaluate/drift-test")
                except urllib.error.HTTPError:
                    return None

            wait_until(deployed, "deployment ragmem-evaluate/drift-test", process=serve)
            triggered = run_cli(["trigger", "drift-test"], env=env, cwd=tmp_path)
            assert triggered.returncode == 0, triggered.stderr
            flow_run = re.search(r"\(([0-9a-f-]{36})\)", triggered.stdout).group(1)

            def ended():
                state = api_get(api_url, f"/flow_runs/{flow_run}")
                return state if state["state_type"] in ("COMPLETED", "FAILED", "CRASHED") else None

            state = wait_until(ended, "the window's flow run", timeout=300, process=serve)
        finally:
            serve.terminate()
            log, _ = serve.communicate(timeout=60)
        # stopped by SIGTERM: the deployment stays, its schedule paused (no run scheduled that nothing serves)
        assert api_get(api_url, "/deployments/name/ragmem-evaluate/drift-test")["paused"] is True
        removed = run_cli(["unserve", "drift-test"], env=env, cwd=tmp_path)
        assert removed.returncode == 0 and removed.stdout.strip() == "removed ragmem-evaluate/drift-test", removed
        with pytest.raises(urllib.error.HTTPError):
            api_get(api_url, "/deployments/name/ragmem-evaluate/drift-test")
        again = run_cli(["unserve", "drift-test"], env=env, cwd=tmp_path)
        assert again.returncode == 2 and "unserve 'drift-test': no deployment of that name" in again.stderr
        assert state["state_type"] == "FAILED", (state, log[-3000:])
        message = state["state"]["message"]
        assert re.search(r"drift: pass_rate down 0\.50 over the last window \(evidence [0-9.e+]+ > 20\)", message), \
            (message, log[-3000:])
        assert len(_Hook.received) == 2, _Hook.received  # the two failed gates of window 4, one message each
        regression, drifted = sorted(_Hook.received, key=lambda m: "drift" in m["title"])
        assert regression["title"] == "ragmem traffic-drift: gate failed: pass_rate"
        assert drifted["title"] == "ragmem traffic-drift: drift: pass_rate"
        for message, bar in ((regression, "max_regression 0.05"), (drifted, "drift max_drop 0.2")):
            assert re.search(r"^pass_rate 0\.4000 \[0\.\d{4}, 0\.\d{4}\]; threshold: " + re.escape(bar) + "$",
                             message["message"], re.M), message["message"]
            assert "experiment traffic-drift, window " in message["message"] and "report: ragmem report " in message["message"]
        assert "worse by more than max_regression 0.05" in regression["message"]
        assert re.search(r"drift: pass_rate down 0\.50 over the last window", drifted["message"])
        tested = run_cli(["alerts", "test", str(config)], env=env, cwd=tmp_path)
        assert tested.returncode == 0 and tested.stdout.strip() == "alert sent to json://…", tested
        assert len(_Hook.received) == 3 and _Hook.received[-1]["title"] == "ragmem traffic-drift: test alert"
        assert f"127.0.0.1:{hook.server_address[1]}" not in log  # (a destination is a secret: never logged)
        hook.shutdown()
        noted = "note: pass_rate: max_regression 0.05 is below what 10 sessions can detect"
        assert noted in log and "the drift gate watches across windows" in log, log[-3000:]
        runs = client.search_runs([client.get_experiment_by_name("traffic-drift").experiment_id],
                                  order_by=["attributes.start_time DESC"])
        assert len(runs) == 4 and json.loads(runs[0].data.tags["ragmem.traces.drift"])["pass_rate"][0] == 10
