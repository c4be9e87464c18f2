"""A full disk, wherever it fills, is one line naming the path and the space left, exit 3, and the
resume pays for nothing twice.

Each case mounts a small tmpfs (in a mount namespace of its own: ``unshare -m``, entered with
``nsenter`` for each command) over one place a run writes, runs ``ragmem run`` with a python agent
that counts its calls in a file elsewhere and an LLM judge on a local scripted endpoint, makes room,
and resumes with the command the line gave. The places: the ragmem home (journal and judge cache),
the MLflow store (its database and artifacts), the ``--output`` file's folder.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.openai_stub import Stub

pytestmark = pytest.mark.e2e

N = 300
EXE = str(Path(sys.executable).parent / "ragmem")


class Namespace:
    """A mount namespace held open by a sleeping process; :meth:`run` runs a command in it."""

    def __init__(self):
        self.holder = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sleep", "900"])

    def run(self, args: list[str], cwd: Path | None = None, **kwargs) -> subprocess.CompletedProcess:
        where = [f"--wd={cwd}"] if cwd else []  # (nsenter starts in the namespace's /, whatever its own folder)
        return subprocess.run(["nsenter", "-t", str(self.holder.pid), "-m", *where, *args], capture_output=True,
                              text=True, timeout=kwargs.pop("timeout", 300), **kwargs)

    def mount(self, folder: Path, size: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        done = self.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)])
        assert done.returncode == 0, done.stderr

    def resize(self, folder: Path, size: str) -> None:
        done = self.run(["mount", "-o", f"remount,size={size}", str(folder)])
        assert done.returncode == 0, done.stderr

    def close(self) -> None:
        self.holder.kill()
        self.holder.wait()


def _can_mount(tmp_path: Path) -> str | None:
    """Why a tmpfs cannot be mounted here, or ``None``."""
    if not (shutil.which("unshare") and shutil.which("nsenter")):
        return "unshare and nsenter (util-linux) are not installed"
    probe = tmp_path / "probe"
    probe.mkdir()
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "mount", "-t", "tmpfs", "-o", "size=64k",
                           "tmpfs", str(probe)], capture_output=True, text=True)
    return None if done.returncode == 0 else f"cannot mount a tmpfs in a mount namespace: {done.stderr.strip()}"


@pytest.fixture
def namespace(tmp_path):
    reason = _can_mount(tmp_path)
    if reason:
        pytest.skip(reason)
    held = Namespace()
    yield held
    held.close()


def _project(folder: Path, endpoint: str) -> Path:
    (folder / "ragmem.toml").write_text("")
    rows = [{"id": f"q{i}", "query": f"question {i} about the memory of the agent " + "detail " * 60,
             "reference_answer": f"answer {i}", "contexts": [f"memory note {i}"]} for i in range(N)]
    (folder / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = folder / "run.yaml"
    config.write_text(f"""experiment: full-disk
data: {{files: [data.jsonl]}}
agent: {{type: python, target: tests.sample_agents:slow_logged, concurrency: 4, batch_size: 20}}
judge: {{type: llm, model: m, base_url: "{endpoint}", retry_backoff_s: 0.01, max_concurrency: 4}}
metrics: [pass_rate]
orchestration: {{workers: 1}}
stats: {{resamples: 50}}
tracking: {{max_traces: 0}}
""")
    return config


def _env(prefect_env: dict, tmp_path: Path, home: Path) -> dict:
    return {**prefect_env, "PYTHONPATH": str(ROOT), "RAGMEM_HOME": str(home), "RAGMEM_TEST_DELAY": "0.005",
            "RAGMEM_TEST_CALLS": str(tmp_path / "calls.txt"), "OPENAI_API_KEY": "x"}


def _agent_calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls.txt").read_text().splitlines()


def _last_line(done: subprocess.CompletedProcess) -> str:
    return [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("ragmem | ")][-1]


def _resumed(namespace: Namespace, done: subprocess.CompletedProcess, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    hint = _last_line(done).split("; resume with: ")[1]
    words = shlex.split(hint)
    assert words[:2] == ["ragmem", "run"], hint
    return namespace.run([EXE, *words[1:]], env=env, cwd=cwd)


def _judge() -> Stub:
    return Stub(chat=lambda request: '{"verdict": "yes", "reason": "supported"}')


@pytest.mark.stress  # (its own lane, pytest -m stress: it mounts file systems)
def test_the_home_full_mid_run_stops_with_one_line_and_the_resume_pays_nothing_twice(prefect_env, tmp_path, namespace):
    home = tmp_path / "home"
    with _judge() as stub:
        config = _project(tmp_path, stub.base_url)
        env = _env(prefect_env, tmp_path, home)
        namespace.mount(home, "6m")  # the reserve takes half; the judge cache fills the rest mid-run
        done = namespace.run([EXE, "run", str(config), "--no-preflight"], env=env, cwd=tmp_path)
        assert done.returncode == 3, done.stderr
        line = _last_line(done)
        assert line.startswith(f"error: the disk is full: {home}/"), done.stderr
        assert " free on its file system)" in line and "Traceback" not in done.stderr
        first = len(_agent_calls(tmp_path))
        assert 0 < first < N, done.stderr  # stopped mid-run
        namespace.resize(home, "64m")
        again = _resumed(namespace, done, env, tmp_path)
        assert again.returncode == 0, again.stderr
        calls = _agent_calls(tmp_path)
        assert len(calls) == N and len(set(calls)) == N  # every example answered once, over both runs
        judged = [r["messages"][-1]["content"] for r in stub.requests]
        assert len(judged) == N and len(set(judged)) == N  # and judged once


@pytest.mark.stress
def test_the_store_full_stops_with_one_line_and_the_resume_pays_nothing_twice(prefect_env, tmp_path, namespace):
    store = tmp_path / "mlruns"
    with _judge() as stub:
        config = _project(tmp_path, stub.base_url)
        env = _env(prefect_env, tmp_path, tmp_path / ".ragmem")
        namespace.mount(store, "64m")
        namespace.run([sys.executable, "-c", "import sys; from ragmem.tracking.store import prepare_local_store; "
                       "prepare_local_store(sys.argv[1])", f"sqlite:///{store}/mlflow.db"], env=env, cwd=tmp_path)
        used = int(namespace.run(["du", "-sb", str(store)]).stdout.split()[0])  # (inside the namespace)
        assert used > 100_000, "the store was not created"
        namespace.resize(store, f"{used // 1024 + 48}k")  # the tables fit; the run's rows and artifacts do not
        done = namespace.run([EXE, "run", str(config), "--no-preflight"], env=env, cwd=tmp_path)
        assert done.returncode == 3, done.stderr
        line = _last_line(done)
        assert line.startswith(f"error: the disk is full: {store}"), done.stderr
        assert "Traceback" not in done.stderr
        namespace.resize(store, "64m")
        if "; resume with: " in line:  # stopped after the run opened (the usual case: at its logging)
            again = _resumed(namespace, done, env, tmp_path)
        else:  # the store could not even open the run: nothing was paid for yet
            assert not (tmp_path / "calls.txt").exists() and not stub.requests
            again = namespace.run([EXE, "run", str(config), "--no-preflight"], env=env, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        calls = _agent_calls(tmp_path)
        assert len(calls) == N and len(set(calls)) == N
        assert len(stub.requests) == N


@pytest.mark.stress
def test_the_output_folder_full_is_one_line_naming_the_stored_run(prefect_env, tmp_path, namespace):
    out = tmp_path / "out"
    with _judge() as stub:
        config = _project(tmp_path, stub.base_url)
        env = _env(prefect_env, tmp_path, tmp_path / ".ragmem")
        namespace.mount(out, "64k")
        namespace.run(["sh", "-c", f"head -c 65536 /dev/zero > {out}/filler"])  # (fails when full: as meant)
        done = namespace.run([EXE, "run", str(config), "--no-preflight", "-o", str(out / "summary.json")],
                             env=env, cwd=tmp_path)
        assert done.returncode == 3, done.stderr
        line = _last_line(done)
        assert line.startswith(f"error: the disk is full: {out}/summary.json (0 B free on its file system); "
                               "the summary was not written; the run "), done.stderr
        run_id = line.split("; the run ")[1].split()[0]
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    assert client.get_run(run_id).info.status == "FINISHED"  # stored whole: nothing to pay again
    assert "summary.json" in {a.path for a in client.list_artifacts(run_id)}
    assert len(_agent_calls(tmp_path)) == N and len(stub.requests) == N


@pytest.mark.stress
def test_the_trace_store_full_at_write_back_names_its_disk_and_the_resume_writes_the_assessments(
        prefect_env, tmp_path, namespace):
    """Issue 60, point 9: the assessments written back to the application's trace store, on a disk of
    its own that fills: one line naming that store (not the ragmem home, not the run's store), exit
    3; with room made, the resume writes them and pays for nothing again (the offline judge here)."""
    app_dir = tmp_path / "app"
    namespace.mount(app_dir, "64m")
    app = f"sqlite:///{app_dir}/app.db"
    env = _env(prefect_env, tmp_path, tmp_path / ".ragmem")
    written = namespace.run([sys.executable, "-c", "import sys; from tests import traffic; "
                             "traffic.write_mlflow(sys.argv[1], 'app', traffic.plan(120, raised=0))", app],
                            env=env, cwd=ROOT)
    assert written.returncode == 0, written.stderr
    filler = app_dir / "filler"  # every byte left taken but a page: the traces there, their assessments not
    filled = namespace.run(["sh", "-c", f"head -c $(( $(df --output=avail -B1 {app_dir} | tail -1) - 4096 )) "
                                        f"/dev/zero > {filler}"])
    assert filler.name in namespace.run(["ls", str(app_dir)]).stdout, filled.stderr
    (tmp_path / "ragmem.toml").write_text("")
    config = tmp_path / "traces.yaml"
    with _judge() as stub:
        config.write_text(f"""experiment: full-traces
data: {{traces: {{experiment: app, tracking_uri: "{app}", since: 7d}}}}
judge: {{type: llm, model: m, base_url: "{stub.base_url}", retry_backoff_s: 0.01}}
metrics: [pass_rate]
stats: {{resamples: 50}}
tracking: {{max_traces: 0}}
""")
        done = namespace.run([EXE, "run", str(config), "--no-preflight"], env=env, cwd=tmp_path)
        _check_trace_store_full(done, namespace, app_dir, filler, env, tmp_path, stub)


def _check_trace_store_full(done, namespace, app_dir, filler, env, tmp_path, stub) -> None:
    assert done.returncode == 3, done.stdout + done.stderr + namespace.run(["df", str(app_dir)]).stdout
    line = _last_line(done)
    assert line.startswith(f"error: the disk is full: {app_dir}/app.db"), done.stderr
    assert "Traceback" not in done.stderr and "; resume with: " in line
    namespace.run(["rm", str(filler)])
    paid = len(stub.requests)
    again = _resumed(namespace, done, env, tmp_path)
    assert again.returncode == 0, again.stderr
    assert len(stub.requests) == paid == 120  # (each trace judged once: the resume only writes)
    counted = namespace.run([sys.executable, "-c", "import sqlite3, sys; print(sqlite3.connect(sys.argv[1])"
                             ".execute('select count(*) from assessments').fetchone()[0])", f"{app_dir}/app.db"])
    assert int(counted.stdout) >= 120  # (each trace's verdict, and its scores)
