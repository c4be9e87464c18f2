"""orchestration.task_runner: dask, on a 2-worker LocalCluster: the scoring batches and a sweep's
children run on Dask workers (through prefect-dask's DaskTaskRunner) and give the threaded run's
numbers exactly."""

import json

import pytest

from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.e2e
DASK = ["--set", "orchestration.task_runner=dask", "--set", "orchestration.dask_workers=2"]


def test_the_scoring_batches_run_on_dask_and_equal_the_threaded_run(prefect_env, tmp_path):
    config = str(ROOT / "configs" / "demo.yaml")
    threads = run_cli(["run", config, "--output", "threads.json"], env=prefect_env, cwd=tmp_path)
    assert threads.returncode == 0, threads.stderr
    dask = run_cli(["run", config, *DASK, "--verbose", "--output", "dask.json"], env=prefect_env, cwd=tmp_path)
    assert dask.returncode == 0, dask.stderr
    log = dask.stdout + dask.stderr
    for batch in ("keyword-sets-batch-0", "score-pairs-batch-0", "offline-entities-batch-0"):
        assert f"Task run '{batch}' - Finished in state Completed()" in log  # Prefect tasks, on Dask
    a, b = (json.loads((tmp_path / name).read_text()) for name in ("threads.json", "dask.json"))
    assert a["metrics"] == b["metrics"] and a["ci"] == b["ci"] and len(a["metrics"]) > 60
    quiet = run_cli(["run", config, *DASK, "--set", "tracking.enabled=false"], env=prefect_env, cwd=tmp_path)
    assert quiet.returncode == 0 and "distributed." not in quiet.stdout + quiet.stderr  # no Dask chatter


def test_a_sweeps_children_run_on_dask(prefect_env, tmp_path):
    config = str(ROOT / "configs" / "demo.yaml")
    grid = ["--set", "sweep.grid={judge.threshold: [0.5, 0.7]}", "--set", "sweep.objective.metric=accuracy"]
    threads = run_cli(["sweep", config, *grid, "--output", "threads.json"], env=prefect_env, cwd=tmp_path)
    assert threads.returncode == 0, threads.stderr
    dask = run_cli(["sweep", config, *grid, *DASK, "--output", "dask.json"], env=prefect_env, cwd=tmp_path)
    assert dask.returncode == 0, dask.stderr
    a, b = (json.loads((tmp_path / name).read_text()) for name in ("threads.json", "dask.json"))
    assert [c["status"] for c in b["children"]] == ["FINISHED", "FINISHED"]
    assert [c["metrics"] for c in a["children"]] == [c["metrics"] for c in b["children"]]
    assert a["best"]["params"] == b["best"]["params"]
