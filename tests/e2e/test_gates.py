"""A failed quality gate through the command: one line per gate and exit 3, after the run is fully
computed and logged. The gates themselves, in process: tests/run/test_gates.py."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e


@pytest.mark.e2e
def test_a_failed_gate_exits_3_after_the_run_is_logged(prefect_env, tmp_path, ragmem_main):
    from mlflow import MlflowClient

    # in this process, as the fast lane runs commands (the exit code of a real `ragmem` process is
    # tested in test_cli and test_bad_inputs): the same main(), the same flow on the shared server
    done = ragmem_main(["run", str(ROOT / "configs" / "demo.yaml"), "--fail-under", "pass_rate=0.9",
                        "--fail-under", "accuracy=0.5", "--fail-over", "avg_coverage=0.5", "-o", "s.json"],
                       env=prefect_env, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().splitlines()[-2:] == ["error: gate failed: pass_rate 0.5833 < 0.9 (min)",
                                                     "error: gate failed: avg_coverage 0.9321 > 0.5 (max)"]
    summary = json.loads((tmp_path / "s.json").read_text())  # written before the verdict
    assert [g["passed"] for g in summary["gates"]] == [False, True, False]
    run = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db").get_run(summary["run_id"])
    assert run.info.status == "FINISHED" and "pass_rate" in run.data.metrics  # fully logged
    again = ragmem_main(["run", str(ROOT / "configs" / "demo.yaml"), "--baseline", summary["run_id"][:8],
                         "--max-regression", "pass_rate=0", "--fail-under", "pass_rate=0.5", "-o", "b.json"],
                        env=prefect_env, cwd=tmp_path)
    assert again.returncode == 0 and "gates: all 2 passed" in again.stdout, again.stderr  # same answers: no drop
    unknown = ragmem_main(["run", str(ROOT / "configs" / "demo.yaml"), "--baseline", "0000abcd",  # refused before
                           "--max-regression", "pass_rate=0"], env=prefect_env, cwd=tmp_path)      # any flow: in process
    assert unknown.returncode == 2 and unknown.stderr.strip().splitlines()[-1] == \
        "error: baseline: run '0000abcd': no run id starts with it in the tracking store"
