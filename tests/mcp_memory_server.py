"""An MCP memory server for the tests, written with the SDK's MCPServer (FastMCP until mcp 2) around
ragmem's reference memory (BM25): ``python tests/mcp_memory_server.py CALLS [--http PORT] [--fail
TOOL] [--die-after N]``.

Tools: ``remember(text, user, turn_id, when)`` stores one turn, ``recall(question, user, limit)``
returns ``{"memories": [{"memory", "turn_id", "score"}]}``, ``forget_all()`` clears everything. Each
call is appended to the JSONL file CALLS (tool and arguments) before it runs. ``--fail TOOL`` makes
that tool raise (the SDK reports it as a tool error); ``--die-after N`` ends the process without a
word on the N-th ``remember``, as a server that crashes mid-ingest.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from mcp.server.mcpserver import MCPServer

from ragmem.reference.memory import BM25Memory
from ragmem.text.keywords import KeywordExtractor



def build(options: argparse.Namespace) -> MCPServer:
    """The server and its tools (importing this module starts nothing)."""
    server = MCPServer("ragmem-test-memory")
    memory = BM25Memory(KeywordExtractor())
    remembered = [0]

    def log(tool: str, **arguments) -> None:
        with open(options.calls, "a", encoding="utf-8") as calls:
            calls.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")
        if options.fail == tool:
            raise RuntimeError(f"{tool} is broken on purpose")

    @server.tool()
    def remember(text: str, user: str, turn_id: str, when: str | None = None) -> str:
        """Store one turn of a conversation."""
        log("remember", text=text, user=user, turn_id=turn_id, when=when)
        remembered[0] += 1
        if options.die_after is not None and remembered[0] >= options.die_after:
            os._exit(3)
        memory.add([{"content": text, "id": turn_id, "timestamp": when}], user, when)
        return "stored"

    @server.tool()
    def recall(question: str, user: str, limit: int) -> dict:
        """The turns of ``user`` that best match ``question``."""
        log("recall", question=question, user=user, limit=limit)
        found = memory.search(question, user, limit)
        return {"memories": [{"memory": m["text"], "turn_id": m["id"], "score": m.get("score")} for m in found]}

    @server.tool()
    def forget(turn_id: str, user: str) -> str:
        """Delete one memory of ``user``."""
        log("forget", turn_id=turn_id, user=user)
        memory.delete(turn_id, user)
        return "forgotten"

    @server.tool()
    def revise(turn_id: str, text: str, user: str) -> str:
        """Rewrite one memory of ``user``."""
        log("revise", turn_id=turn_id, text=text, user=user)
        memory.update(turn_id, text, user)
        return "revised"

    @server.tool()
    def forget_all() -> str:
        """Clear every user's memories."""
        log("forget_all")
        memory.reset()
        return "cleared"

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("calls")
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--fail", default=None)
    parser.add_argument("--die-after", type=int, default=None)
    options = parser.parse_args()
    print("mcp test server starting", file=sys.stderr)
    if options.http is not None:
        build(options).run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        build(options).run()
