"""Runs that survive faults, in process: the preflight and the breaker, a judge or an HTTP agent dying
mid-run, a resume refused for another config, an interrupted sweep resumed. The same faults through
the command (a subprocess against a local Prefect server, its calls counted in a file):
tests/e2e/test_faults.py.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from tests.conftest import ROOT

N = 300


def _write_data(folder: Path, n: int = N) -> Path:
    path = folder / "data.json"
    path.write_text(json.dumps([{"id": f"q{i}", "query": f"question {i}", "reference_answer": f"question {i}"}
                                for i in range(n)]))
    return path


def _calls(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.is_file() else []


# ---- in process: preflight, breakers, resume rules -------------------------------------------------

import ragmem  # noqa: E402
from ragmem.clients.endpoints import Breaker, Endpoint, EndpointDown, preflight, probe  # noqa: E402
from ragmem.errors import ConfigError  # noqa: E402
from tests.conftest import write_replayed  # noqa: E402
from tests.openai_stub import Stub, verdict_by_answer as _verdict  # noqa: E402


def _replayed(tmp_path: Path, n: int = 40) -> str:
    return write_replayed(tmp_path, n)


M = ["accuracy", "f1"]


def _judge(url: str, tmp_path: Path, **extra) -> dict:
    return {"type": "llm", "model": "judge-test", "base_url": url, "cache_dir": str(tmp_path / "cache"),
            "retry_backoff_s": 0.01, "max_retries": 1, "timeout_s": 5, "max_concurrency": 2, **extra}


def _store(shared_store, experiment: str) -> dict:
    return {"tracking": {"uri": shared_store["uri"], "artifact_root": shared_store["artifact_root"]},
            "experiment": experiment}


def test_preflight_names_the_dead_endpoint_before_any_work(tmp_path):
    with pytest.raises(EndpointDown) as caught:
        ragmem.evaluate(_replayed(tmp_path), track=False, metrics=M, judge=_judge("http://127.0.0.1:9/v1", tmp_path))
    message = str(caught.value)
    assert message.startswith("judge.base_url http://127.0.0.1:9/v1: cannot connect")
    assert "nothing was run" in message and caught.value.exit_code == 2
    # every kind of endpoint is named by its setting; several dead ones are all listed
    dead = [Endpoint("agent.url", "http://127.0.0.1:9/agent", "http"),
            Endpoint("tracking.uri", "http://127.0.0.1:9", "mlflow")]
    with pytest.raises(EndpointDown, match=r"^agent.url http://127.0.0.1:9/agent: cannot connect .*\(and 1 more: tracking.uri\)"):
        preflight(dead)
    assert probe(Endpoint("x", "not a url", "http")).startswith("not a usable URL")


def test_preflight_passes_a_live_endpoint_and_can_be_skipped(tmp_path):
    with Stub(chat=_verdict) as stub:
        assert probe(Endpoint("judge.base_url", stub.base_url, "openai")) is None  # any HTTP answer
        result = ragmem.evaluate(_replayed(tmp_path, 4), track=False, metrics=M, judge=_judge(stub.base_url, tmp_path))
    assert result.metrics["judge_calls"] == 4
    # skipped: the dead endpoint is then met by the breaker during the run
    with pytest.raises(EndpointDown, match="consecutive failures") as caught:
        ragmem.evaluate(_replayed(tmp_path, 4), track=False, preflight=False, metrics=M,
                        judge=_judge("http://127.0.0.1:9/v1", tmp_path, cache=False))
    assert caught.value.exit_code == 3


def test_the_breaker_opens_on_consecutive_endpoint_failures_or_a_failing_window():
    breaker = Breaker("judge.base_url", "http://x/v1", consecutive=3, window=10, ratio=0.8)
    for _ in range(2):
        breaker.failure("APIConnectionError", True)
    breaker.failure("InternalServerError (HTTP 500)", False)  # not an endpoint failure: the run restarts
    breaker.failure("APIConnectionError", True)
    breaker.success()
    assert not breaker.open
    for _ in range(3):
        breaker.failure("APIConnectionError: refused", True)
    assert breaker.open and "3 consecutive failures (last: APIConnectionError: refused)" in breaker.reason
    with pytest.raises(EndpointDown):
        breaker.check()
    window = Breaker("judge.base_url", "http://x/v1", consecutive=99, window=10, ratio=0.8)
    for i in range(10):
        window.failure("HTTP 503", False) if i % 5 else window.success()
    assert window.open and "8 of the last 10 calls failed" in window.reason


def test_a_slow_server_that_answers_some_requests_keeps_the_breaker_closed():
    """A timeout is a slow reply, not a refusal: a window of timeouts with one reply in it is an
    alive server (its timed-out items are recorded and asked again by a rerun); a window in which
    no request got a reply opens the breaker, with what to change."""
    slow = Breaker("judge.base_url", "http://x/v1", consecutive=5, window=10, ratio=0.8)
    for i in range(40):
        slow.success() if i % 10 == 0 else slow.failure("APITimeoutError: timed out", False, slow=True)
    assert not slow.open
    for _ in range(10):
        slow.failure("APITimeoutError: timed out", False, slow=True)
    assert slow.open and slow.reason == (
        "judge.base_url http://x/v1: none of the last 10 calls got a reply (10 timed out; last: APITimeoutError: "
        "timed out); the run stopped; a slow server: raise the timeout (timeout_s) or lower the concurrency")
    refused = Breaker("judge.base_url", "http://x/v1", consecutive=99, window=10, ratio=0.8)
    for i in range(10):  # refusals (5xx) still open it at the ratio, replies among them or not
        refused.failure("HTTP 503", False) if i % 5 else refused.success()
    assert refused.open and "8 of the last 10 calls failed" in refused.reason


def test_a_judge_dying_mid_run_stops_it_and_the_resume_pays_nothing_twice(tmp_path, shared_store):
    down = {"after": 12}
    with Stub(chat=_verdict, fail=lambda n: "reset" if down["after"] and n > down["after"] else None) as stub:
        settings = {**_store(shared_store, "judge-dies"), "agent": {"batch_size": 10},
                    "judge": _judge(stub.base_url, tmp_path), "metrics": ["accuracy", "f1"]}
        started = time.monotonic()
        with pytest.raises(EndpointDown) as caught:
            ragmem.evaluate(_replayed(tmp_path), config=settings)
        assert time.monotonic() - started < 60
        assert caught.value.exit_code == 3 and "judge.base_url" in str(caught.value)
        key, done, total = caught.value.ragmem_progress
        assert total == 40 and 10 <= done <= 20
        client = MlflowClient(shared_store["uri"])
        run = client.get_run(key)
        assert run.info.status == "FAILED" and "EndpointDown" in run.data.tags["ragmem.error"]
        sent_before = len(stub.requests)

        down["after"] = 0  # the endpoint is back
        result = ragmem.evaluate(_replayed(tmp_path), config=settings, resume=key[:8])  # the prefix a run prints
    assert result.run_id == key and client.get_run(key).info.status == "FINISHED"
    assert int(result.table["verdict"].notna().sum()) == 40 and result.metrics["judge_failures"] == 0
    # the verdicts obtained before the endpoint died came from the cache
    assert result.metrics["judge_cache_hits"] >= 10
    assert len(stub.requests) - sent_before == 40 - result.metrics["judge_cache_hits"]


def test_an_http_agent_that_stops_answering_stops_the_run(tmp_path):
    data = tmp_path / "live.json"
    data.write_text(json.dumps([{"id": f"q{i}", "query": f"q{i}", "reference_answer": "a"} for i in range(60)]))
    with Stub(chat=lambda r: {"answer": "a"}, fail=lambda n: "reset" if n > 5 else None) as stub:
        with pytest.raises(EndpointDown, match=r"^agent.url http://127.0.0.1:\d+/agent: 5 consecutive failures") as caught:
            ragmem.evaluate(str(data), track=False, agent={"type": "http", "url": stub.base_url.replace("/v1", "/agent"),
                                                           "retries": 0, "concurrency": 1})
    # 5 answered, then resets: the breaker opens at the 5th; one more call may be in flight
    assert caught.value.ragmem_progress[1] <= 10 and len(stub.requests) <= 11  # stopped, not 60 calls


def test_a_resume_is_refused_for_another_config_a_finished_run_or_a_live_one(tmp_path, shared_store, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))  # the journals of this test, nowhere else
    data = _replayed(tmp_path, 6)
    settings = _store(shared_store, "resume-rules")
    done = ragmem.evaluate(data, config=settings)
    with pytest.raises(ConfigError, match=r"differs from the interrupted run's in judge.threshold \(0.7 -> 0.5\)"):
        ragmem.evaluate(data, config={**settings, "judge": {"threshold": 0.5}}, resume=done.run_id)
    ragmem.evaluate(data, config={**settings, "agent": {"concurrency": 3}}, resume=None)  # a new run: fine
    with pytest.raises(ConfigError, match="already FINISHED"):
        ragmem.evaluate(data, config={**settings, "agent": {"concurrency": 3}}, resume=done.run_id)
    from ragmem.run.journal import Journal

    with pytest.raises(ConfigError, match=r"--resume 0123456789abcdef: no run of this ragmem home \(.*\) starts with it"):
        ragmem.evaluate(data, config=settings, resume="0123456789abcdef")
    assert not Journal.folder_for("0123456789abcdef").exists()  # a refused resume creates nothing
    with pytest.raises(ConfigError, match="expected a run id or a prefix of at least 4 characters"):
        ragmem.evaluate(data, config=settings, resume="ab")
    twin = Journal.folder_for(done.run_id[:6] + "zz-twin")  # another journal with the same first 6 characters
    twin.mkdir(parents=True)
    (twin / "run.json").write_text("{}")
    with pytest.raises(ConfigError, match=f"--resume {done.run_id[:6]}: more than one run starts with it"):
        ragmem.evaluate(data, config=settings, resume=done.run_id[:6])
    with pytest.raises(ConfigError, match="already FINISHED"):  # 8 characters: unique again
        ragmem.evaluate(data, config={**settings, "agent": {"concurrency": 3}}, resume=done.run_id[:8])

    from ragmem.tracking import Tracker

    tracker = Tracker(shared_store["uri"], shared_store["artifact_root"])
    live = tracker.create_run("resume-rules", "live")  # RUNNING, this (alive) process's pid
    with pytest.raises(ConfigError, match=f"still running \\(pid {os.getpid()}\\)"):
        tracker.reopen(live)
    tracker.set_tags(live, {"ragmem.pid": "999999999"})  # its process is gone: resumable
    tracker.reopen(live)
    assert tracker.client.get_run(live).data.tags["ragmem.resumed"] == "1"


# ---- end to end: dead endpoints, a stuck agent, the Prefect server killed mid-run -------------------


def test_an_interrupted_sweep_resumes_only_its_unfinished_children(tmp_path, shared_store, monkeypatch):
    # (a real SIGINT reaches this process: tests/conftest.py puts Python's handler back when a
    # suite started in the background inherited SIGINT ignored)
    from ragmem.run import engine
    from ragmem.config.loading import resolve_config

    _write_data(tmp_path, 120)
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv("RAGMEM_TEST_CALLS", str(calls))
    monkeypatch.setenv("RAGMEM_TEST_DELAY", "0.005")
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    line = len("question 100\n")  # about 1.5 children's worth of calls, then Ctrl+C
    monkeypatch.setenv("RAGMEM_TEST_INTERRUPT_AT_BYTES", str(180 * line))
    monkeypatch.delenv("RAGMEM_TEST_INTERRUPTED", raising=False)
    monkeypatch.syspath_prepend(str(ROOT))
    config = resolve_config(None, data=str(tmp_path / "data.json"), extra={
        **_store(shared_store, "sweep-resume"), "tracking": {**_store(shared_store, "x")["tracking"], "max_traces": 0},
        "agent": {"type": "python", "target": "tests.sample_agents:slow_logged", "concurrency": 2, "batch_size": 20},
        # (an agent setting: children that differ only in the judge would share one child's answers)
        "sweep": {"grid": {"agent.timeout_s": [30.0, 40.0, 50.0]}, "max_parallel": 1}})
    with pytest.raises(KeyboardInterrupt) as caught:
        engine.sweep(config)
    parent, finished, total, unit = caught.value.ragmem_progress
    assert (finished, total, unit) == (1, 3, "configurations done")
    client = MlflowClient(shared_store["uri"])
    statuses = lambda: sorted(r.info.status for r in client.search_runs(  # noqa: E731
        [client.get_experiment_by_name("sweep-resume").experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent}'"))
    assert client.get_run(parent).info.status == "KILLED"
    assert statuses() == ["FINISHED", "KILLED", "KILLED"]
    made_before = len(_calls(calls))
    assert made_before < 3 * 120

    summary = engine.sweep(config, resume=parent)
    assert summary["parent_run_id"] == parent and client.get_run(parent).info.status == "FINISHED"
    assert statuses() == ["FINISHED", "FINISHED", "FINISHED"]
    assert [c["status"] for c in summary["children"]] == ["FINISHED"] * 3
    assert all(c["metrics"]["reference_coverage"] == 1.0 for c in summary["children"])
    made = _calls(calls)
    print(f"sweep: {made_before} calls before the interrupt, {len(made)} in all")
    assert 3 * 120 <= len(made) <= 3 * 120 + 2  # the finished child not rerun; at most the calls in flight twice
    with pytest.raises(ConfigError, match="already finished"):
        engine.sweep(config, resume=parent)


