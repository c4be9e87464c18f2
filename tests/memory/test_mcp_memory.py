"""Memory layers over MCP, in process: a method is checked before anything starts, a missing package
says how to install it, the arguments are filled and the memories read. Against a real MCP server
(``tests/mcp_memory_server.py``) started as a subprocess, over stdio and streamable HTTP:
tests/e2e/test_memory.py."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT

from ragmem.errors import ConfigError


SERVER = str(ROOT / "tests" / "mcp_memory_server.py")
TOOLS = {"add": {"name": "remember", "args": {"text": "{content}", "user": "{user_id}", "turn_id": "{id}", "when": "{timestamp}"}},
         "search": {"name": "recall", "args": {"question": "{query}", "user": "{user_id}", "limit": "{top_k}"},
                    "results": "memories", "text": "memory", "id": "turn_id"},
         "reset": {"name": "forget_all"}}


def _stdio(name, calls, *flags, tools=TOOLS):
    return {"name": name, "type": "mcp", "command": [sys.executable, SERVER, str(calls), *flags], "tools": tools,
            "timeout_s": 60}


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
