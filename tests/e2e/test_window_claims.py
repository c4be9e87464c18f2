"""Two windows at once pay once (issue 60): two ``ragmem run`` of one incremental traces config started
at the same instant (two schedules, a retry overlapping a slow run). Exactly one judges; the other
exits 2 with one line naming the run that holds the windows; the judge receives 20 requests for 20
traces. Then the next window starts where the first one ended."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from tests import traffic
from tests.openai_stub import Stub

pytestmark = pytest.mark.e2e


def test_two_overlapping_windows_started_at_once_judge_once(prefect_env, tmp_path):
    app, store = f"sqlite:///{tmp_path / 'app.db'}", f"sqlite:///{tmp_path / 'eval.db'}"
    env = {**prefect_env, "RAGMEM_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "x"}
    traffic.write_mlflow(app, "app", traffic.plan(20, raised=0))
    with Stub(chat=lambda request: {"verdict": "yes", "reason": "supported"}, latency_s=0.05) as stub:
        config = tmp_path / "window.yaml"
        config.write_text(f"""experiment: window-eval
data:
  traces: {{experiment: app, tracking_uri: "{app}", since: 6h, incremental: true, lag: 0s}}
judge: {{type: llm, model: m, base_url: "{stub.base_url}", max_concurrency: 2, retry_backoff_s: 0.01}}
metrics: [pass_rate]
stats: {{resamples: 200}}
tracking: {{uri: "{store}", max_traces: 0}}
""")
        start = threading.Barrier(2)
        done: list = [None, None]

        def run(i):
            start.wait()
            done[i] = subprocess.run([sys.executable, "-m", "ragmem.cli", "run", str(config), "-o", f"s{i}.json"],
                                     env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(660)
        codes = sorted(d.returncode for d in done)
        assert codes == [0, 2], [(d.returncode, d.stderr[-2000:]) for d in done]
        judged, refused = sorted(done, key=lambda d: d.returncode)
        lines = [line for line in refused.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: data.traces.incremental: the windows of this config "
                                                       "are held by pid "), refused.stderr
        assert "Traceback" not in refused.stderr + judged.stderr
        assert len(stub.requests) == 20  # one verdict a trace, sent once
        first = json.loads((tmp_path / f"s{done.index(judged)}.json").read_text())
        assert first["traces"]["evaluated"] == 20

        # the claim was given back: the next window runs, from where the first ended
        traffic.write_mlflow(app, "app", traffic.plan(4, raised=0, first=20, start_ns=time.time_ns(), step_ns=10**6))
        again = subprocess.run([sys.executable, "-m", "ragmem.cli", "run", str(config), "-o", "s2.json"],
                               env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stderr
        assert json.loads((tmp_path / "s2.json").read_text())["traces"]["evaluated"] == 4 and len(stub.requests) == 24
