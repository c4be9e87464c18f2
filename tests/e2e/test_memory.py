"""Memory layers end to end: real MCP servers started as subprocesses (over stdio and streamable
HTTP; ``tests/mcp_memory_server.py``), and a bench-memory rerun from its manifest through the command's
flow. The layers and the paired comparison in process: tests/memory/."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.memory.test_mcp_memory import SERVER, TOOLS, _stdio
from tests.memory.test_memory import _conversation

pytestmark = pytest.mark.e2e


needs_mcp = pytest.mark.skipif(__import__("importlib").util.find_spec("mcp") is None,
                               reason="the mcp package is not installed (pip install 'ragmem[mcp]')")


def _calls(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def http_server(tmp_path):
    """The same server over streamable HTTP on a free 127.0.0.1 port, started by the test."""
    port = free_port()
    calls = tmp_path / "http_calls.jsonl"
    log = open(tmp_path / "http_server.log", "w")
    proc = subprocess.Popen([sys.executable, SERVER, str(calls), "--http", str(port)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120  # a busy machine imports slowly: wait on readiness, generously
    while True:
        assert proc.poll() is None, (tmp_path / "http_server.log").read_text()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "the MCP HTTP server did not listen within 120 s"
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}/mcp", calls
    proc.terminate()
    proc.wait(30)
    log.close()


@needs_mcp
@pytest.mark.e2e  # MCP servers are subprocesses; the command's flow on the shared Prefect server
def test_an_mcp_layer_gets_the_mapped_arguments_and_its_ids_come_back(tmp_path, http_server, shared_store, prefect_env,
                                                                        ragmem_main):
    url, http_calls = http_server
    data = tmp_path / "c1.json"
    data.write_text(json.dumps(_conversation()))
    stdio_calls = tmp_path / "stdio_calls.jsonl"
    config = tmp_path / "bench.json"
    config.write_text(json.dumps({
        "experiment": "bench-mcp", "stats": {"resamples": 200}, "seed": 1,
        "tracking": {"uri": shared_store["uri"], "artifact_root": shared_store["artifact_root"]},
        "bench": {"data": str(data), "top_k": 3, "methods": [
            "reference", _stdio("mcp_stdio", stdio_calls), {"name": "mcp_http", "type": "mcp", "url": url, "tools": TOOLS}]},
        "judge": {"type": "keyword", "threshold": 0.5}}))
    env = {**prefect_env, "MLFLOW_TRACKING_URI": shared_store["uri"]}
    done = ragmem_main(["bench-memory", str(config), "-o", str(tmp_path / "bench.json")], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "bench.json").read_text())

    for calls in (stdio_calls, http_calls):
        seen = _calls(calls)
        assert seen[0] == {"tool": "forget_all", "arguments": {}}  # reset first
        remembered = [c["arguments"] for c in seen if c["tool"] == "remember"]
        assert remembered == [  # one call per turn, each argument mapped
            {"text": "(1:00 pm on 1 May, 2023) Ann: I adopted a cat named Miso.", "user": "locomo-c1", "turn_id": "D1:1",
             "when": "1:00 pm on 1 May, 2023"},
            {"text": "(1:00 pm on 1 May, 2023) Bob: Lovely! I went to Paris.", "user": "locomo-c1", "turn_id": "D1:2",
             "when": "1:00 pm on 1 May, 2023"},
            {"text": "(2:00 pm on 8 May, 2023) Ann: Miso is now three months old.", "user": "locomo-c1", "turn_id": "D2:1",
             "when": "2:00 pm on 8 May, 2023"}]
        recalled = [c["arguments"] for c in seen if c["tool"] == "recall"]
        assert recalled[0] == {"question": "What is the name of Ann's cat?", "user": "locomo-c1", "limit": 3}
        assert len(recalled) == 4

    metrics = {m["method"]: m["metrics"] for m in result["methods"]}
    assert [m["status"] for m in result["methods"]] == ["FINISHED"] * 3
    # the turn ids came back: the same memory behind MCP recalls what the reference layer recalls
    for method in ("mcp_stdio", "mcp_http"):
        assert metrics[method]["evidence_recall"] == metrics["reference"]["evidence_recall"] == 1.0
        assert metrics[method]["judge_score"] == metrics["reference"]["judge_score"]
    assert [r["method"] for r in result["results_table"]] == ["reference", "mcp_stdio", "mcp_http"]
    paired = [p for p in result["paired"] if p["scope"] == "overall" and p["score"] == "J"]
    assert [(p["method"], p["diff"], p["marked"]) for p in paired] == [("mcp_stdio", 0.0, False), ("mcp_http", 0.0, False)]
    printed = " ".join(done.stdout.split())
    assert "mcp_stdio" in printed and "mcp_http" in printed and "against reference, on the same questions" in printed


@needs_mcp
@pytest.mark.e2e  # MCP servers are subprocesses
def test_a_failing_tool_a_dying_server_and_a_missing_tool_are_contained(tmp_path):
    from ragmem.run import engine

    data = tmp_path / "c1.json"
    data.write_text(json.dumps(_conversation()))
    missing = {**TOOLS, "search": {**TOOLS["search"], "name": "lookup"}}
    result = engine.bench_memory({
        "experiment": "bench-mcp-faults", "tracking": {"enabled": False}, "stats": {"resamples": 100},
        "bench": {"data": str(data), "methods": [
            _stdio("broken_recall", tmp_path / "a.jsonl", "--fail", "recall"),
            _stdio("dies", tmp_path / "b.jsonl", "--die-after", "2"),
            _stdio("no_such_tool", tmp_path / "c.jsonl", tools=missing),
            "reference"]},
        "judge": {"type": "keyword", "threshold": 0.5}}, preflight=False)
    by = {m["method"]: m for m in result["methods"]}
    assert by["reference"]["status"] == "FINISHED"
    assert by["broken_recall"]["status"] == "FAILED" and "tool recall reported an error" in by["broken_recall"]["error"]
    assert by["dies"]["status"] == "FAILED" and "Connection closed" in by["dies"]["error"]
    assert "2 adds failed too" in by["dies"]["error"]  # the first session was stored, the server died in the second turn
    assert by["no_such_tool"]["status"] == "FAILED" and (
        "tools.search.name: the server has no tool 'lookup' (it has: forget, forget_all, recall, remember, revise)" in by["no_such_tool"]["error"])
    assert _calls(tmp_path / "c.jsonl") == []  # nothing was called on a layer whose tools did not check out
    assert [r["method"] for r in result["results_table"]] == ["broken_recall", "dies", "no_such_tool", "reference"]


@pytest.mark.e2e  # the command's flow on the shared Prefect server (in this process)
def test_a_rerun_from_the_manifest_reproduces_every_offline_score(tmp_path, shared_store, prefect_env, ragmem_main):
    data = tmp_path / "c.json"
    data.write_text(json.dumps(_conversation()))
    config = tmp_path / "bench.json"
    config.write_text(json.dumps({"experiment": "bench-rerun", "stats": {"resamples": 200},
                                  "tracking": {"uri": shared_store["uri"], "artifact_root": shared_store["artifact_root"]},
                                  "bench": {"data": str(data), "methods": ["reference", "no_memory"]},
                                  "judge": {"type": "keyword", "threshold": 0.5}}))
    env = {**prefect_env, "MLFLOW_TRACKING_URI": shared_store["uri"]}
    done = ragmem_main(["bench-memory", str(config), "-o", str(tmp_path / "first.json")], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    first = json.loads((tmp_path / "first.json").read_text())
    manifest = first["manifest"]
    assert manifest["data"]["sha256"] == __import__("hashlib").sha256(data.read_bytes()).hexdigest()
    assert manifest["categories"]["abstention"] == 5 and manifest["top_k"] == 10
    assert [m["type"] for m in manifest["methods"]] == ["reference", "no_memory"] and manifest["judge"].startswith("judge:keyword")

    again = ragmem_main(["bench-memory", "--rerun", first["parent_run_id"][:8], "-o", str(tmp_path / "again.json")],
                        env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    result = json.loads((tmp_path / "again.json").read_text())
    assert result["rerun_of"] == first["parent_run_id"] and result["parent_run_id"] != first["parent_run_id"]
    assert [(r["method"], r["identical"]) for r in result["rerun"]] == [("reference", True), ("no_memory", True)]
    assert all(p["diff"] == 0.0 and not p["marked"] for r in result["rerun"] for p in r["paired"])
    assert len(result["results_table"]) == 2 and all(  # every score the same, latencies aside
        {k: v for k, v in a.items() if "(s)" not in k} == {k: v for k, v in b.items() if "(s)" not in k}
        for a, b in zip(result["results_table"], first["results_table"]))
    assert "rerun: reference: every per-question score identical to run " in " ".join(again.stdout.split())

    data.write_text(json.dumps(_conversation(qa=[{"question": "Q?", "answer": "A", "evidence": [], "category": 4}])))
    changed = ragmem_main(["bench-memory", "--rerun", first["parent_run_id"][:8]], env=env, cwd=tmp_path)
    assert changed.returncode == 2 and changed.stderr.strip().splitlines()[-1].startswith(
        f"error: --rerun {first['parent_run_id'][:8]}: the data {data} is missing or not the bytes the first run read")
    neither = ragmem_main(["bench-memory"], env=env, cwd=tmp_path)
    assert neither.returncode == 2 and "give a CONFIG, or --rerun PARENT_RUN_ID" in neither.stderr


def test_the_lifecycle_suite_through_an_mcp_server_deletes_with_its_tool(tmp_path, monkeypatch):
    """Issue 59: the MCP adapter maps update and delete onto the server's tools (here ``revise`` and
    ``forget``, beside the same server without them): with the tools, every fact asked to be forgotten
    is deleted (compliance 1) through ``forget`` calls; without them the request is the user's
    statement, the fact still recalled, the layer flagged."""
    from ragmem.run import engine

    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    full = {**TOOLS, "update": {"name": "revise", "args": {"turn_id": "{memory_id}", "text": "{text}", "user": "{user_id}"}},
            "delete": {"name": "forget", "args": {"turn_id": "{memory_id}", "user": "{user_id}"}}}
    with_tools, without = tmp_path / "with.jsonl", tmp_path / "without.jsonl"
    result = engine.bench_memory({
        "experiment": "lifecycle", "tracking": {"enabled": False}, "stats": {"resamples": 0},
        "bench": {"dataset": "lifecycle", "data": "seed:2/per_kind:1",
                  "methods": [_stdio("mcp_delete", with_tools, tools=full), _stdio("mcp_add_only", without)]}},
        preflight=False)
    metrics = {m["method"]: m["metrics"] for m in result["methods"]}
    assert [m["status"] for m in result["methods"]] == ["FINISHED", "FINISHED"]
    assert metrics["mcp_delete"]["deletion_compliance"] == 1.0 and metrics["mcp_delete"]["path_delete_api"] == 1.0
    assert metrics["mcp_add_only"]["deleted_still_recalled"] == 1.0 and metrics["mcp_add_only"]["path_delete_api"] == 0.0
    calls = [json.loads(line) for line in with_tools.read_text().splitlines()]
    assert sum(c["tool"] == "forget" for c in calls) == 2 and sum(c["tool"] == "revise" for c in calls) == 2
    assert not any(json.loads(line)["tool"] in ("forget", "revise") for line in without.read_text().splitlines())
    flags = {m["method"]: m["flags"] for m in result["methods"]}
    assert flags["mcp_delete"] == {} and "ragmem.memory.deletion" in flags["mcp_add_only"]
