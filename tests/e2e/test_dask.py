"""orchestration.task_runner: dask, on a LocalCluster: the scoring batches and a sweep's children run
on Dask workers (through prefect-dask's DaskTaskRunner) and give the threaded run's numbers exactly;
Ctrl+C leaves no worker behind. One worker where the work is one batch or one child at a time (a
worker process costs an import of ragmem and Prefect), two where the test is about several."""

import json

import pytest

from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.e2e
DASK = ["--set", "orchestration.task_runner=dask", "--set", "orchestration.dask_workers=1"]
DASK_2 = ["--set", "orchestration.task_runner=dask", "--set", "orchestration.dask_workers=2"]


def _dask_run(args, prefect_env, tmp_path):
    """``ragmem run`` with ``args`` on Dask, checked to end well without Dask chatter: its summary,
    and the state of each Prefect task run of its flow, by name."""
    from mlflow import MlflowClient

    from tests.conftest import api_post

    dask = run_cli(["run", *args, "--output", "dask.json"], env=prefect_env, cwd=tmp_path)
    assert dask.returncode == 0, dask.stderr
    assert "distributed." not in dask.stdout + dask.stderr  # no Dask chatter
    summary = json.loads((tmp_path / "dask.json").read_text())
    tags = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db").get_run(summary["run_id"]).data.tags
    api_url = f"http://127.0.0.1:{prefect_env['RAGMEM_PREFECT_PORT']}/api"
    tasks = api_post(api_url, "/task_runs/filter",
                     {"flow_runs": {"id": {"any_": [tags["prefect.flow_run_id"]]}}, "limit": 200})
    return summary, {t["name"]: t["state_type"] for t in tasks}


def test_the_scoring_batches_run_on_dask_and_equal_the_threaded_run(prefect_env, tmp_path):
    import ragmem

    config = str(ROOT / "configs" / "demo.yaml")
    b, states = _dask_run([config, *DASK], prefect_env, tmp_path)
    # the batches ran as Prefect tasks of the run's flow (on Dask), each completed
    for batch in ("keyword-sets-batch-0", "score-pairs-batch-0", "shared-entities-batch-0"):
        assert states.get(batch) == "COMPLETED", states
    # the threaded run: the same engine in this process (the command's own threaded run is tested in test_cli)
    a = ragmem.evaluate(config=config, track=False).summary
    assert a["metrics"] == b["metrics"] and a["ci"] == b["ci"] and len(a["metrics"]) > 60


def test_a_streamed_runs_chunks_are_read_and_scored_on_the_dask_workers(prefect_env, tmp_path):
    """data.chunk_size under the dataset's size: each chunk's bounds go to a worker (task chunk-N),
    which reads, answers, judges and scores it; the run equals the threaded one bit for bit."""
    from ragmem.run import engine
    from ragmem.run import prepare

    config = str(ROOT / "configs" / "demo.yaml")
    b, states = _dask_run([config, *DASK_2, "--set", "data.chunk_size=7"], prefect_env, tmp_path)
    assert {name: states.get(name) for name in (f"chunk-{i}" for i in range(6))} == \
        {f"chunk-{i}": "COMPLETED" for i in range(6)}, states  # 36 examples, chunks of 7
    assert not any(name.startswith(("time-agent", "score-chunk")) for name in states)  # none in the flow
    ready = prepare.for_run(prepare.resolve(config, overrides=["data.chunk_size=7", "tracking.enabled=false"]))
    a = engine.evaluate(ready.config, dataset=ready.dataset, keep_journal=False).summary
    for summary in (a, b):
        summary["metrics"].pop("keywords_cache_hit_rate")  # usage: each worker's own cache
    assert a["metrics"] == b["metrics"] and a["ci"] == b["ci"] and a["counts"] == b["counts"]


def test_a_clusters_workers_that_cannot_reach_a_streamed_datasets_files_are_refused(tmp_path, monkeypatch):
    from distributed import LocalCluster

    from ragmem.run.environment import check_dask_workers
    from ragmem.errors import ConfigError

    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    data = tmp_path / "data.jsonl"
    data.write_text("{}\n")
    with LocalCluster(n_workers=1, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=None) as cluster:
        check_dask_workers(cluster.scheduler_address, [data], 10)  # reachable: nothing said
        with pytest.raises(ConfigError, match=r"orchestration.dask_address tcp://127.0.0.1:\d+: the worker at "
                                              r"tcp://127.0.0.1:\d+ cannot read .*missing.jsonl; .*shared file system"
                                              r"\), or set data.chunk_size to 10 or more"):
            check_dask_workers(cluster.scheduler_address, [data, tmp_path / "missing.jsonl"], 10)


def test_a_sweeps_children_run_on_dask(prefect_env, tmp_path):
    import ragmem

    config = str(ROOT / "configs" / "demo.yaml")
    grid = ["--set", "sweep.grid={judge.threshold: [0.5, 0.7]}", "--set", "sweep.objective.metric=accuracy"]
    dask = run_cli(["sweep", config, *grid, *DASK, "--output", "dask.json"], env=prefect_env, cwd=tmp_path)
    assert dask.returncode == 0, dask.stderr
    # each child announced once, on a Dask worker too
    announced = sorted(line.split(": ", 2)[-1].split(" ->")[0] for line in dask.stderr.splitlines()
                       if " configurations: " in line)
    assert announced == ["threshold=0.5", "threshold=0.7"], dask.stderr
    assert dask.stdout.strip().splitlines()[-1].startswith("MLflow parent run ")
    children = json.loads((tmp_path / "dask.json").read_text())["children"]
    assert [c["status"] for c in children] == ["FINISHED", "FINISHED"]
    # each child's numbers are the threaded engine's for its grid point (computed here, in process)
    for child, threshold in zip(children, (0.5, 0.7)):
        threaded = ragmem.evaluate(config=config, track=False, judge={"threshold": threshold}).summary
        assert child["metrics"] == {k: v for k, v in threaded["metrics"].items() if k in child["metrics"]}
        assert len(child["metrics"]) > 60 and child["metrics"]["accuracy"] == threaded["metrics"]["accuracy"]


def _pgid(pid: int) -> int | None:
    import os

    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def test_ctrl_c_ends_a_dask_run_with_ragmems_line_only(prefect_env, tmp_path):
    """A terminal's Ctrl+C reaches its whole foreground process group. The Dask workers leave it, so
    only ragmem answers: one line, exit 130, no worker left."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import wait_until

    words = "retrieval memory vector index chunk rerank answer context query agent".split()
    records = [{"id": f"e{i}", "query": f"what is {words[i % 10]} {i}?", "label": i % 2,
                "reference_answer": f"{words[i % 10]} {words[(i * 3) % 10]} {i} 检索增强生成",
                "generated_answer": f"{words[(i * 7) % 10]} {i} 向量数据库",
                "contexts": [{"id": f"c{(i + k) % 500}", "text": f"{words[(i + k) % 10]} 上下文 {(i + k) % 500}"}
                             for k in range(4)]} for i in range(6000)]
    (tmp_path / "data.json").write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    log = tmp_path / "err.txt"
    with open(log, "w", encoding="utf-8") as err:
        proc = subprocess.Popen([sys.executable, "-m", "ragmem.cli", "run", str(ROOT / "configs" / "demo.yaml"),
                                 "--data", "data.json", "--set", "tracking.enabled=false", *DASK_2],
                                env=prefect_env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err, text=True,
                                start_new_session=True,  # its own group, as a terminal's foreground job
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            def workers() -> list[str]:  # started: each has left the run's process group (its Dask preload)
                pids = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "from multiprocessing.spawn"],
                                      capture_output=True, text=True).stdout.split()
                return [p for p in pids if _pgid(int(p)) == int(p)]
            wait_until(lambda: ("6000/6000 examples" in log.read_text(encoding="utf-8") and len(workers()) >= 2)
                       or proc.poll() is not None, "the Dask workers scoring")
            assert proc.poll() is None, log.read_text(encoding="utf-8")
            time.sleep(2)  # scoring batches on the workers
            dask_pids = [int(p) for p in workers()]
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=180)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    out = log.read_text(encoding="utf-8")
    assert proc.returncode == 130, out
    assert "Traceback" not in out and "distributed." not in out and "KeyboardInterrupt" not in out, out
    assert out.strip().splitlines()[-1].startswith("interrupted: 6000 of 6000 examples answered; resume with: ")

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    gone = lambda: not subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True).stdout.strip()  # noqa: E731
    wait_until(lambda: gone() and not any(map(alive, dask_pids)), "every process of the run gone", timeout=60)
