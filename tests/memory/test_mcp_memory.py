"""Memory layers over MCP: a real MCP server (``tests/mcp_memory_server.py``, written with the SDK's
MCPServer around ragmem's reference memory) started as a subprocess, over stdio (ragmem starts and
stops it) and streamable HTTP (the test starts it); the mapped arguments reach its tools, the turn
ids come back for recall, and a failing tool, a server that dies mid-ingest and a tool that does not
exist each end as one FAILED method while the others complete."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port
from tests.memory.test_memory import _conversation

from ragmem.errors import ConfigError

needs_mcp = pytest.mark.skipif(__import__("importlib").util.find_spec("mcp") is None,
                               reason="the mcp package is not installed (pip install 'ragmem[mcp]')")

SERVER = str(ROOT / "tests" / "mcp_memory_server.py")
TOOLS = {"add": {"name": "remember", "args": {"text": "{content}", "user": "{user_id}", "turn_id": "{id}", "when": "{timestamp}"}},
         "search": {"name": "recall", "args": {"question": "{query}", "user": "{user_id}", "limit": "{top_k}"},
                    "results": "memories", "text": "memory", "id": "turn_id"},
         "reset": {"name": "forget_all"}}


def _stdio(name, calls, *flags, tools=TOOLS):
    return {"name": name, "type": "mcp", "command": [sys.executable, SERVER, str(calls), *flags], "tools": tools,
            "timeout_s": 60}


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
        "tools.search.name: the server has no tool 'lookup' (it has: forget_all, recall, remember)" in by["no_such_tool"]["error"])
    assert _calls(tmp_path / "c.jsonl") == []  # nothing was called on a layer whose tools did not check out
    assert [r["method"] for r in result["results_table"]] == ["broken_recall", "dies", "no_such_tool", "reference"]


@pytest.mark.parametrize("method, message", [
    ({"type": "mcp", "tools": TOOLS}, r"expected either command \(a stdio server\) or url \(streamable HTTP\) for type mcp"),
    ({"type": "mcp", "command": ["x"], "url": "http://127.0.0.1:1/mcp", "tools": TOOLS}, "expected either command"),
    ({"type": "mcp", "command": []}, "command: expected a non-empty list of strings"),
    ({"type": "mcp", "url": "127.0.0.1:9/mcp", "tools": TOOLS}, r"url: expected an http\(s\) URL for type mcp"),
    ({"type": "mcp", "command": ["x"]}, "tools: required for type mcp"),
    ({"type": "mcp", "command": ["x"], "tools": {**TOOLS, "search": {"name": "recall", "args": {"q": "{question}"}}}},
     r"search.args: \{question\} is not a value of search \(known: query, user_id, top_k\)"),
    ({"type": "mcp", "command": ["x"], "tools": {**TOOLS, "add": {"name": "remember", "per": "session", "args": {"t": "{content}"}}}},
     r"add.args: \{content\} is not a value of add per session \(known: messages, user_id, timestamp\)"),
    ({"type": "mcp", "command": ["x"], "tools": {"add": {"name": "remember"}}}, "search"),
])
def test_an_mcp_method_is_checked_before_anything_starts(method, message):
    from ragmem.memory.layers import method_specs

    with pytest.raises(ConfigError, match=message):
        method_specs([{"name": "m", **method}])


def test_without_the_mcp_package_the_layer_says_how_to_install_it(monkeypatch):
    from ragmem.memory.mcp_layer import McpMemory
    from ragmem.memory.layers import method_specs

    monkeypatch.setitem(sys.modules, "mcp", None)  # as if not installed: its import fails
    with pytest.raises(ConfigError, match=r"type: mcp needs the mcp package: pip install 'ragmem\[mcp\]'"):
        McpMemory(method_specs([_stdio("m", "calls.jsonl")])[0])


def test_the_arguments_are_filled_and_the_memories_read():
    from ragmem.memory.mcp_layer import McpError, fill, memories
    from ragmem.config.sweep_settings import McpTool

    template = {"text": "{content}", "meta": {"turn": "{id}", "tags": ["{role}", "fixed"]}, "note": "at {timestamp}", "n": 2}
    assert fill(template, {"content": "hi", "id": "D1:1", "role": "user", "timestamp": None}) == {
        "text": "hi", "meta": {"turn": "D1:1", "tags": ["user", "fixed"]}, "note": "at None", "n": 2}
    plain = McpTool(name="s")
    # a bare list, {results: [...]}, and the SDK's {result: [...]} wrap of a list return; strings are memories
    for reply in ([{"text": "a"}], {"results": [{"text": "a"}]}, {"result": [{"text": "a"}]}, ["a"]):
        assert memories(reply, plain) == [{"text": "a"}]
    assert memories([{"text": "a", "id": "server-uuid"}], plain) == [{"text": "a"}]  # no id field named: no ids
    with pytest.raises(McpError, match="search tool s: 'hits' is not a list of memories"):
        memories({"results": []}, McpTool(name="s", results="hits"))
