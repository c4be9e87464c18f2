"""Shared fixtures. Nothing here calls outside this machine."""

from __future__ import annotations

import contextlib
import json
import linecache
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: not collected: the MCP server the memory tests start as a subprocess (--doctest-modules imported it
#: in every worker, and with it the MCP SDK's server: 0.55 s each, for no test)
collect_ignore = ["mcp_memory_server.py"]

# A suite started in the background by a non-interactive shell (`pytest ... &` in a script) inherits
# SIGINT ignored, and so would every command a test starts (an ignored signal stays ignored across
# exec): the interrupt tests would send a Ctrl+C that nobody hears. A handler is reset by exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _checkcache_race_free(filename=None, _checkcache=linecache.checkcache):
    """``linecache.checkcache`` that survives another thread changing the cache while it is walked.
    A doctest resets pdb, which walks the whole cache; SQLAlchemy (MLflow's store) registers the
    source of the classes it generates there from whatever thread opens a store, and CPython 3.11
    reads each listed key with ``cache[key]``: a key dropped meanwhile failed a doctest with
    ``KeyError: '<sqlalchemy generated __init__ ...>'`` (the CI's fast lane at f390a55, once locally before)."""
    try:
        _checkcache(filename)
    except KeyError:
        pass


linecache.checkcache = _checkcache_race_free
SHARED = ROOT.parent / "shared" / "data"
SEED = SHARED / "seed-samples"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def outside_env(folder: Path, drop: tuple[str, ...] = (), **settings: str) -> dict[str, str]:
    """This process's environment as a new user's shell has it, for a command run outside the tests'
    own settings: without ragmem's variables (``RAGMEM_*``) and those starting with ``drop``, but with
    the shared Prefect server's folder at ``folder / "server"``, never the user's own
    (``~/.local/state/ragmem/prefect-server``: the wheel test, dropping it, wrote over the pid files of
    the server of the user running the tests); ``settings`` set on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGMEM_", *drop))}
    env.update(RAGMEM_SERVER_HOME=str(folder / "server"), **settings)
    return env


def _call(request, attempts=30):
    """One JSON call to a local REST API (Prefect's, MLflow's), retried on 503 as Prefect's own client does.

    The server answers 503 "Service Unavailable" when its SQLite database is busy (SQLITE_BUSY,
    prefect.server.api.server.is_client_retryable_exception): the request is meant to be retried.
    A raw urllib call does not retry, so under load (the runner polling, a flow run writing) the
    test failed on a 503 in CI.
    """
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as error:
            if error.code != 503 or attempt == attempts - 1:
                raise
            time.sleep(min(0.2 * 2 ** attempt, 2.0))


def wait_until(ready, what: str, timeout: float = 180.0, process: subprocess.Popen | None = None):
    """Poll ``ready()`` until it returns a true value (returned) or ``timeout`` seconds pass. The
    limit is generous on purpose: on a loaded machine a server can take a minute to answer. With
    ``process``, stop early (and show its output) when it exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = ready()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{what}: the process exited with {process.returncode}: {process.stdout.read()}")
        time.sleep(0.5)
    raise AssertionError(f"{what}: not ready after {timeout:.0f} s")


def interrupted_when(command: list[str], ready, what: str, env: dict[str, str], cwd: Path,
                     timeout: float = 180.0) -> subprocess.CompletedProcess:
    """Start ``command``, wait until ``ready()`` (or the command ended), send it Ctrl+C (SIGINT) and
    return how it ended, its output captured. A command still running when the wait fails is killed."""
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: ready() or process.poll() is not None, what, timeout=timeout)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(command, process.returncode, out, err)


@contextlib.contextmanager
def mlflow_server(folder: Path):
    """A real ``mlflow server`` on a free 127.0.0.1 port, its sqlite store and artifacts in
    ``folder``, answering when the block starts: ``(url, process)``; its process group killed at
    the end (a test may kill it before)."""
    from ragmem.clients.endpoints import Endpoint, probe

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                               "--backend-store-uri", f"sqlite:///{folder}/server.db",
                               "--default-artifact-root", str(folder / "server-artifacts"), "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: probe(Endpoint("tracking.uri", url, "mlflow")) is None, "the MLflow server", process=server)
        yield url, server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)


def api_get(api_url, path):
    return _call(f"{api_url}{path}")


def api_post(api_url, path, body):
    return _call(urllib.request.Request(f"{api_url}{path}", data=json.dumps(body).encode(),
                                        headers={"content-type": "application/json"}))


@pytest.fixture(autouse=True)
def _command_environment():
    """What a ``ragmem`` command run in this process (``main([...])``) sets in the environment for
    itself, put back after every test: ``RAGMEM_SOURCE_NAME`` left as ``ragmem serve ...`` by one test
    made the next test's API runs (in the same worker) tagged JOB instead of LOCAL."""
    saved = os.environ.get("RAGMEM_SOURCE_NAME")
    yield
    if saved is None:
        os.environ.pop("RAGMEM_SOURCE_NAME", None)
    else:
        os.environ["RAGMEM_SOURCE_NAME"] = saved
    if "ragmem.config.secrets" in sys.modules:  # the secret values a test's configs gave: not the next test's
        sys.modules["ragmem.config.secrets"].forget()


@pytest.fixture(scope="session")
def shared_store(tmp_path_factory) -> dict[str, str]:
    """One MLflow store for the in-process tests (creating a sqlite store runs MLflow's migrations,
    ~2 s each); every test logs to an experiment of its own."""
    root = tmp_path_factory.mktemp("mlflow")
    return {"uri": f"sqlite:///{root}/mlflow.db", "artifact_root": str(root / "artifacts")}


@pytest.fixture
def seed_dir() -> Path:
    if not (SEED / "evaluation_samples_true.json").is_file():
        pytest.skip(f"seed data not found at {SEED} (the workplace's shared/data folder is absent)")
    return SEED


@contextlib.contextmanager
def file_server(root: Path, broken: dict[str, bytes] | None = None):
    """A 127.0.0.1 HTTP server of the files under ``root`` (``broken``: paths served with other
    bytes); yields ``(base_url, requested paths)``."""
    import functools
    import http.server
    import threading

    requested: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            requested.append(self.path)
            if broken and self.path in broken:
                body = broken[self.path]
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requested
    finally:
        server.shutdown()
        server.server_close()


def fetch_shared(name: str, env: dict[str, str]) -> None:
    """``ragmem data fetch NAME`` from a local server of the workplace's shared copy (skips without it)."""
    folder = {"locomo": SHARED / "locomo", "seed-samples": SEED}[name]
    if not folder.is_dir():
        pytest.skip(f"{folder} not found (the workplace's shared/data folder is absent)")
    with file_server(folder) as (url, _):
        done = run_cli(["data", "fetch", name, "--mirror", url], env=env)
    assert done.returncode == 0, done.stderr


def start_managed_server(home: Path, **extra: str) -> dict[str, str]:
    """Start ragmem's managed Prefect server on a free 127.0.0.1 port with ``home`` as RAGMEM_HOME,
    the way the CLI starts it; returns the environment a CLI subprocess needs to use it."""
    env = {**os.environ, "RAGMEM_HOME": str(home), "RAGMEM_SERVER_HOME": str(home / "server"),
           "RAGMEM_PREFECT_PORT": str(free_port()), "DO_NOT_TRACK": "true", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           **extra}
    env.pop("PREFECT_API_URL", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    started = subprocess.run([sys.executable, "-m", "ragmem.cli", "server", "start"], env=env,
                             capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stderr
    return env


def write_replayed(folder: Path, n: int, name: str = "replayed.json") -> str:
    """``n`` replayed examples: odd ones answer "good answer i." (label 1), even ones "bad answer i." (0)."""
    path = folder / name
    path.write_text(json.dumps([{"id": f"e{i}", "query": f"Question {i}?", "reference_answer": f"Answer {i}.",
                                 "generated_answer": ("good " if i % 2 else "bad ") + f"answer {i}.", "label": i % 2}
                                for i in range(n)]))
    return str(path)


_PREFECT_KEYS = ("RAGMEM_HOME", "RAGMEM_SERVER_HOME", "RAGMEM_PREFECT_PORT", "DO_NOT_TRACK",
                 "PREFECT_SERVER_ANALYTICS_ENABLED")


@contextlib.contextmanager
def _locked(path: Path):
    import fcntl

    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# A served deployment (``ragmem serve``) asks the server for its due runs every second instead of
# Prefect's 10 (PREFECT_RUNNER_POLL_FREQUENCY): a test that triggers a run waited up to 10 s for
# each one to start, doing nothing.
_QUICK_POLL = {"PREFECT_RUNNER_POLL_FREQUENCY": "1"}


@pytest.fixture(scope="session")
def prefect_env(tmp_path_factory):
    """One Prefect server on a free 127.0.0.1 port for the whole session, started the way the CLI
    starts its managed server; yields the environment a CLI subprocess needs to use it. With
    pytest-xdist the workers share it: the first to ask starts it, the session's end stops it
    (:func:`pytest_sessionfinish`)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        env = start_managed_server(tmp_path_factory.mktemp("ragmem-home"))
        yield {**env, **_QUICK_POLL}
        _stop_server(env)
        return
    extra = _shared_server(tmp_path_factory.getbasetemp().parent)  # the same folder for every worker
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI")}
    yield {**env, **extra, **_QUICK_POLL}


def _shared_server(shared: Path) -> dict[str, str]:
    """The session's Prefect server, started by the first to ask: its environment variables."""
    state = shared / "prefect-env.json"
    with _locked(shared / "prefect-env.lock"):
        if not state.is_file():
            started = start_managed_server(shared / "ragmem-home")
            state.write_text(json.dumps({k: started[k] for k in _PREFECT_KEYS}), encoding="utf-8")
        return json.loads(state.read_text(encoding="utf-8"))


def pytest_sessionstart(session):
    """The whole suite on workers: the controller starts the shared Prefect server at once, on a
    thread, so that its ~15 s start overlaps the workers' own start instead of holding all four
    at their first end-to-end test. (A lane without e2e tests, or a run of named tests, starts
    none here; the first test that needs it does.)"""
    config = session.config
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    marks = config.getoption("markexpr") or ""
    if "not e2e" in marks or any(lane in marks for lane in OWN_LANES) or config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        return
    import threading

    shared = config._tmp_path_factory.getbasetemp()
    threading.Thread(target=_shared_server, args=(shared,), daemon=True).start()


def _stop_server(env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "ragmem.cli", "server", "stop"], env=env, capture_output=True,
                   text=True, timeout=60)


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto`` (pyproject's addopts): four workers for the whole suite, whose end-to-end tests
    spend much of their time waiting on servers and subprocesses, and two for the fast lane
    (``-m "not e2e"``), which is CPU work: each worker pays its own imports of MLflow, Prefect and
    pandas and its own first run (about 5 s), and on two cores a third one made the lane slower
    once its stubs stopped idling half a second at shutdown (57-58 s with two workers against 60 s
    with three, 85-89 s of CPU against 103 s, interleaved, on this machine)."""
    marks = config.getoption("markexpr") or ""
    return 2 if "not e2e" in marks else 4


def pytest_configure(config):
    """The tests never write into the checkout: a run's journal, the last-error log and a managed
    server's files go to a ragmem home of this test process (a test that needs its own sets its own)."""
    import tempfile

    if "RAGMEM_HOME" not in os.environ:
        os.environ["RAGMEM_HOME"] = tempfile.mkdtemp(prefix="ragmem-test-home-")
    if "RAGMEM_SERVER_HOME" not in os.environ:  # (never the user's own shared Prefect server)
        os.environ["RAGMEM_SERVER_HOME"] = tempfile.mkdtemp(prefix="ragmem-test-server-")


#: the longest tests (20 to 60 s each on four workers, measured): they start first, so that none of
#: them is left running alone at the end of the session while the other workers idle
LONGEST_FIRST = ("test_three_windows", "test_two_hundred_mlflow_traces", "test_sweep_retriever_config", "test_losing_the_prefect_server", "test_dask.py::",
                 "test_a_tracking_server_dying", "test_two_homes", "test_scheduled_deployment",
                 "test_an_interrupted_run_resumes", "test_paired_compare", "test_a_failed_gate",
                 "test_a_failing_child", "test_samples_measure_the_judges_noise", "test_dead_endpoints")


def _start_order(item) -> tuple[int, int]:
    """The longest tests first (in :data:`LONGEST_FIRST`'s order), then the other end-to-end tests,
    then the fast lane: with ``--maxschedchunk 1`` the workers take them one by one in this order."""
    for rank, name in enumerate(LONGEST_FIRST):
        if name in item.nodeid:
            return (0, rank)
    return (1, 0) if item.get_closest_marker("e2e") is not None else (2, 0)


def pytest_ignore_collect(collection_path, config):
    """The fast lane (``-m "not e2e"``) does not import tests/e2e/: every test there is end to end
    (tests/test_layers.py holds it), and importing them only to deselect them cost each worker 0.55 s."""
    if (config.getoption("markexpr") or "").strip() == "not e2e" and collection_path == ROOT / "tests" / "e2e":
        return True
    return None


#: lanes that run only when ``-m`` names them, each a CI step of its own: the wheel lane (minutes of
#: installing into a fresh environment) and the stress lane (eight runs started at once: 16 processes
#: on a 2-core machine, which slowed every test beside it by a third)
OWN_LANES = ("wheel", "stress")


def pytest_collection_modifyitems(config, items):
    """The wheel and stress lanes run only when ``-m`` names them (``pytest -m wheel``, ``pytest -m
    stress``), in no other lane. The rest start longest first."""
    items.sort(key=_start_order)  # (a stable sort: the collection's order within each group)
    marks = config.getoption("markexpr") or ""
    left_out = [lane for lane in OWN_LANES if lane not in marks]
    kept = [item for item in items if not any(item.get_closest_marker(lane) for lane in left_out)]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


def pytest_sessionfinish(session):
    """The controller of an xdist session stops the Prefect server its workers shared."""
    if hasattr(session.config, "workerinput") or not hasattr(session.config, "_tmp_path_factory"):
        return
    state = session.config._tmp_path_factory.getbasetemp() / "prefect-env.json"
    if state.is_file():
        _stop_server({**os.environ, **json.loads(state.read_text(encoding="utf-8"))})


def run_cli(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmem.cli", *args], env=env or dict(os.environ),
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)


class Ran:
    """What a ``ragmem`` command run in this process left: its exit code and output."""

    def __init__(self, returncode: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def ragmem_lines(caplog):
    """The messages of the ``ragmem`` logger at INFO and up, as the test runs (a list filled as they
    come): the logger's own handlers may not pass them on to pytest's (it does not propagate once
    a command set it up)."""
    lines: list[str] = []

    class Recorder(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    recorder = Recorder(level=logging.DEBUG)
    logging.getLogger("ragmem").addHandler(recorder)
    caplog.set_level(logging.INFO, logger="ragmem")
    try:
        yield lines
    finally:
        logging.getLogger("ragmem").removeHandler(recorder)


@pytest.fixture
def ragmem_main(monkeypatch, capsys):
    """Run ``ragmem ARGS`` in this process (``ragmem.cli.app.main``), as the fast lane does instead of a
    subprocess: ``ragmem_main(args, env=None, cwd=None) -> Ran``. The environment variables the
    command sets, its working folder and its logger are put back afterwards."""
    import logging

    from ragmem.cli.app import main

    def run(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> Ran:
        saved_env = dict(os.environ)
        logger = logging.getLogger("ragmem")
        saved_log = (list(logger.handlers), logger.level, logger.propagate)
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as stopped:
            code = stopped.code if isinstance(stopped.code, int) else (0 if stopped.code is None else 1)
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
            logger.handlers[:], logger.level, logger.propagate = saved_log
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return run
