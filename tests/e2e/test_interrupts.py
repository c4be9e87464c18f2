"""Ctrl+C or SIGTERM at any moment of a run ends it with one line and no traceback.

Each case starts ``ragmem run`` as a subprocess against the session's Prefect server, waits for a
moment of the run (a time after the start, or the first line of a stage: the progress prints every
0.2 s here), sends SIGINT or SIGTERM and reads what the command left: exit 130 or 143, one line on
stderr that is not a progress line (``interrupted...``), no ``Traceback``. Two runs are interrupted:
a python agent over 700 examples (3,500 texts: enough for the worker pool) (data load, the worker pool's start-up while the agent's first
batches are scored, agent, metrics, bootstrap, logging) and an LLM judge whose endpoint accepts
connections and never answers (the requests hang).
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e

N = 700
#: (case, run, stderr line that marks the moment or None for the start, seconds after it, signal). Each
#: moment is interrupted once, SIGINT and SIGTERM in turn (both reach every kind of run: the agent's,
#: the replayed ones, the judge's); that each signal gives its own exit code and line wherever it lands
#: is held in process by tests/runtime/test_home.py (the same ragmem.exits.finish for both)
MOMENTS = [
    ("imports", "agent", None, 0.8, signal.SIGINT),
    ("data-load", "agent", None, 2.5, signal.SIGTERM),
    ("flow-start", "agent", "Prefect API:", 0.0, signal.SIGINT),
    ("pool-start", "agent", "Prefect API:", 1.0, signal.SIGTERM),
    ("agent", "agent", "agent:", 0.5, signal.SIGINT),
    ("metrics", "replay", "| metrics", 0.0, signal.SIGTERM),
    ("bootstrap", "replay", "| bootstrap", 0.0, signal.SIGINT),
    ("logging", "replay-light", "| logging to MLflow", 0.0, signal.SIGTERM),
    ("judge-hangs", "judge", "| judge", 0.3, signal.SIGTERM),
    ("judge-hangs-long", "judge", "| judge", 3.0, signal.SIGINT),
]


@pytest.fixture(scope="module")
def silent_endpoint():
    """A 127.0.0.1 port that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(200)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.5)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    server.close()


def _configs(folder: Path, endpoint: str) -> dict[str, Path]:
    rows = [{"id": f"q{i}", "query": f"question {i} about memory", "reference_answer": f"question {i} about memory",
             "generated_answer": f"answer {i} about memory", "contexts": [f"memory note {i}", "other"]} for i in range(N)]
    (folder / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the logging moment's run: 4,200 examples, so that logging them lasts past the 0.2 s of its first
    # line (700 took 0.1-0.2 s on a quiet machine, and the run ended before the moment)
    (folder / "data-light.jsonl").write_text("".join(json.dumps({**r, "id": f"{r['id']}-{k}"}) + "\n"
                                                     for k in range(6) for r in rows))
    agent = folder / "agent.yaml"
    agent.write_text("""experiment: interrupts
data: {files: [data.jsonl]}
agent: {type: python, target: tests.sample_agents:slow_logged, concurrency: 8, batch_size: 100}
orchestration: {workers: 2}
stats: {resamples: 300}
tracking: {max_traces: 0}
""")
    # the later moments: no agent to wait for; the logging moment's run scores in its own process; the
    # bootstrap's 20,000 resamples last ~0.8 s here, so that its running line comes at 0.2 s (at 3,000
    # it lasted 0.12-0.25 s: on a fast machine it printed nothing and the run ended before the moment)
    for name, resamples, workers, data in (("replay", 20000, 2, "data.jsonl"), ("replay-light", 200, 1, "data-light.jsonl")):
        (folder / f"{name}.yaml").write_text(f"""experiment: interrupts
data: {{files: [{data}]}}
agent: {{type: replay}}
orchestration: {{workers: {workers}}}
stats: {{resamples: {resamples}}}
tracking: {{max_traces: 0}}
""")
    judge = folder / "judge.yaml"
    judge.write_text(f"""experiment: interrupts
data: {{files: [data.jsonl]}}
agent: {{type: replay}}
judge: {{type: llm, model: m, base_url: "{endpoint}", timeout_s: 120, max_concurrency: 8, api_key_env: NO_KEY_NEEDED}}
metrics: [accuracy, answer_correctness]
orchestration: {{workers: 1}}
tracking: {{max_traces: 0}}
""")
    return {"agent": agent, "judge": judge, "replay": folder / "replay.yaml", "replay-light": folder / "replay-light.yaml"}


def _interrupt(command, env, cwd, marker, delay, sig, err_path: Path) -> tuple[int, str, float, str]:
    with open(err_path, "w") as err:
        proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
    try:
        started = time.monotonic()
        while marker is not None and marker not in err_path.read_text():
            assert proc.poll() is None, f"the run ended before {marker!r}:\n{err_path.read_text()}"
            assert time.monotonic() - started < 240, f"no {marker!r} within 240 s:\n{err_path.read_text()}"
            time.sleep(0.02)
        time.sleep(delay)
        assert proc.poll() is None, f"the run ended before the signal:\n{err_path.read_text()}"
        before = err_path.read_text()  # what the run had said when the signal was sent
        proc.send_signal(sig)
        sent = time.monotonic()
        try:
            code = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:  # where it hangs: faulthandler prints every thread's stack on SIGABRT
            proc.send_signal(signal.SIGABRT)
            proc.wait(timeout=30)
            raise AssertionError(f"no exit within 120 s of the signal; the stacks:\n{err_path.read_text()}") from None
        return code, err_path.read_text(), time.monotonic() - sent, before
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("case,run,marker,delay,sig", MOMENTS,
                         ids=[f"{m[0]}-{'sigint' if m[4] == signal.SIGINT else 'sigterm'}" for m in MOMENTS])
def test_an_interrupt_at_any_moment_is_one_line(prefect_env, tmp_path, silent_endpoint, case, run, marker, delay, sig):
    configs = _configs(tmp_path, silent_endpoint)
    # (20 ms per agent call, 8 at a time: the agent's 700 calls take ~1.8 s, so that its moment falls
    # inside it; at 4 ms its first progress line came when it had all but finished)
    env = {**prefect_env, "PYTHONPATH": str(ROOT), "RAGMEM_TEST_CALLS": str(tmp_path / "calls.txt"),
           "RAGMEM_TEST_DELAY": "0.02", "RAGMEM_PROGRESS": "log", "RAGMEM_PROGRESS_INTERVAL": "0.2",
           "NO_KEY_NEEDED": "x", "PYTHONFAULTHANDLER": "1"}
    command = [str(Path(sys.executable).parent / "ragmem"), "run", str(configs[run]), "--no-preflight"]  # the command itself
    code, err, took, before = _interrupt(command, env, tmp_path, marker, delay, sig, tmp_path / "stderr.txt")
    if code == 0 and "| logging to MLflow: done" in before:
        # the run had done all its work when the signal was sent (on a busy machine the test can wake
        # seconds late), and a command that has ended and said so ignores signals: that moment was
        # missed, not mishandled. It is tried once more; an exit 0 otherwise fails below.
        code, err, took, before = _interrupt(command, env, tmp_path, marker, delay, sig, tmp_path / "stderr.txt")
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("ragmem | ")]
    assert "Traceback" not in err, err
    assert code == (130 if sig == signal.SIGINT else 143), err
    assert len(lines) == 1 and lines[0].startswith("interrupted"), err
    stacks = re.search(r"its threads' stacks in (\S+?);", lines[0])  # (the wind-down bound ended a hang: where it hung)
    assert took < 60 and not stacks, f"{took:.1f} s from the signal to the exit: {lines[0]}\n" + (
        Path(stacks.group(1)).read_text(errors="replace") if stacks and Path(stacks.group(1)).is_file() else "")
