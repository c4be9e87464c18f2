"""orchestration.task_runner: dask, on a 2-worker LocalCluster: the scoring batches and a sweep's
children run on Dask workers (through prefect-dask's DaskTaskRunner) and give the threaded run's
numbers exactly."""

import json

import pytest

from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.e2e
DASK = ["--set", "orchestration.task_runner=dask", "--set", "orchestration.dask_workers=2"]


def test_the_scoring_batches_run_on_dask_and_equal_the_threaded_run(prefect_env, tmp_path):
    import ragmem

    config = str(ROOT / "configs" / "demo.yaml")
    dask = run_cli(["run", config, *DASK, "--verbose", "--output", "dask.json"], env=prefect_env, cwd=tmp_path)
    assert dask.returncode == 0, dask.stderr
    log = dask.stdout + dask.stderr
    for batch in ("keyword-sets-batch-0", "score-pairs-batch-0", "offline-entities-batch-0"):
        assert f"Task run '{batch}' - Finished in state Completed()" in log  # Prefect tasks, on Dask
    # the threaded run: the same engine in this process (the command's own threaded run is tested in test_cli)
    a = ragmem.evaluate(config=config, track=False).summary
    b = json.loads((tmp_path / "dask.json").read_text())
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
    for out in (threads, dask):  # each child announced once, on a Dask worker too
        announced = sorted(line.split(": ", 2)[-1].split(" ->")[0] for line in out.stderr.splitlines()
                           if " configurations: " in line)
        assert announced == ["threshold=0.5", "threshold=0.7"], out.stderr
        assert out.stdout.strip().splitlines()[-1].startswith("MLflow parent run ")
    a, b = (json.loads((tmp_path / name).read_text()) for name in ("threads.json", "dask.json"))
    assert [c["status"] for c in b["children"]] == ["FINISHED", "FINISHED"]
    assert [c["metrics"] for c in a["children"]] == [c["metrics"] for c in b["children"]]
    assert a["best"]["params"] == b["best"]["params"]


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
                                 "--data", "data.json", "--set", "tracking.enabled=false", *DASK],
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
