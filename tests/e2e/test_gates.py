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


@pytest.mark.e2e
def test_a_metric_of_ones_own_from_the_command_line_gates_and_compares(prefect_env, tmp_path, ragmem_main):
    """``metrics.custom`` named in a config (its module next to the config, run from another folder):
    its value, a failed gate on it (exit 3), its failure counted, and ``compare`` pairing two runs on it."""
    home = tmp_path / "eval"
    home.mkdir()
    (home / "checks.py").write_text(
        "import re\n"
        "def order_id_format(answer):\n"
        "    if answer.startswith('<<'):\n"
        "        raise ValueError('unreadable answer')\n"
        "    return bool(re.search(r'\\bORD-\\d{6}\\b', answer))\n", encoding="utf-8")
    for name, every in (("good", 1), ("half", 2)):
        rows = [{"id": f"o{i}", "query": f"Where is order {i}?", "reference": f"Order ORD-{100000 + i} ships.",
                 "answer": "<<garbled>>" if i == 7 else (f"Order ORD-{100000 + i} ships." if i % every == 0
                                                         else "Your order ships soon.")} for i in range(20)]
        (home / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (home / "own.yaml").write_text(
        "experiment: own\nagent: {type: replay}\nmetrics:\n  names: [pass_rate]\n"
        "  custom: [{name: order_id_format, target: 'checks:order_id_format'}]\n"
        "gates: {order_id_format: {min: 0.9}}\n", encoding="utf-8")
    ran = {}
    for name in ("good", "half"):
        done = ragmem_main(["run", str(home / "own.yaml"), "--data", str(home / f"{name}.jsonl"), "-o", f"{name}.json"],
                           env=prefect_env, cwd=tmp_path)
        ran[name] = json.loads((tmp_path / f"{name}.json").read_text())
        assert ran[name]["metrics"]["order_id_format_failures"] == 1
        if name == "good":
            assert done.returncode == 0 and ran[name]["metrics"]["order_id_format"] == 1.0, done.stderr
        else:
            assert done.returncode == 3, done.stderr
            assert done.stderr.strip().splitlines()[-1] == "error: gate failed: order_id_format 0.5263 < 0.9 (min)"
        assert "order_id_format: its function failed on 1 of 20 answered examples" in " ".join(done.stdout.split())
    env = {**prefect_env, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlruns/mlflow.db", "COLUMNS": "160"}
    compared = ragmem_main(["compare", ran["good"]["run_id"][:8], ran["half"]["run_id"][:8], "--metrics",
                            "order_id_format", "--resamples", "400"], env=env, cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    line = next(ln for ln in compared.stdout.splitlines() if "order_id_format" in ln)
    assert "1.0000" in line and "0.5263" in line and "-0.4737" in line
