"""A run in which nothing could be measured is stored, then ends with one line and exit 3: every
judge verdict failed (a reply that gives its verdict twice is invalid), or every agent call failed."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT, run_cli, write_replayed
from tests.openai_stub import Stub

pytestmark = pytest.mark.e2e


def test_every_verdict_invalid_is_exit_3_with_one_line(prefect_env, tmp_path):
    with Stub(chat=lambda request: '{"verdict": "no", "verdict": "yes", "reason": "both"}') as stub:
        config = tmp_path / "c.json"
        config.write_text(json.dumps({"experiment": "nothing-judged", "metrics": ["pass_rate"],
                                      "judge": {"type": "llm", "model": "m", "base_url": stub.base_url,
                                                "retry_backoff_s": 0.01, "cache_dir": str(tmp_path / "cache")},
                                      "data": {"files": [{"path": write_replayed(tmp_path, 3)}]}}))
        done = run_cli(["run", str(config), "-o", "s.json"], env=prefect_env, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: every judge verdict failed (3 of 3 answered examples): nothing was judged; the run is stored as "
        f"{summary['run_id']}")


def test_every_agent_call_failed_is_exit_3_with_one_line(prefect_env, tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"experiment": "nothing-answered", "agent": {"type": "python",
                                                                             "target": "tests.sample_agents:always_fails"},
                                  "data": {"files": [{"path": write_replayed(tmp_path, 3)}]}}))
    done = run_cli(["run", str(config), "-o", "s.json"], env={**prefect_env, "PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: every agent call failed (3 of 3): nothing was measured")
