"""A memory layer served over MCP (``bench.methods: [{type: mcp, ...}]``), through the official
``mcp`` Python SDK (``pip install 'ragmem[mcp]'``).

The server is either a command ragmem starts and stops (``command: [program, arg, ...]``, stdio; it
inherits the environment, its stderr goes to a file whose last lines name why it died) or a running
server (``url:``, streamable HTTP). Its tools are named in ``tools`` with how ragmem's values map
onto their arguments (:class:`ragmem.config.sweep_settings.McpTool`)::

    tools:
      add:    {name: add_memory, args: {text: "{content}", user_id: "{user_id}", turn_id: "{id}"}}
      search: {name: search_memory, args: {query: "{query}", user_id: "{user_id}", limit: "{top_k}"},
               results: memories, text: text, id: turn_id}
      reset:  {name: reset_memory}
      delete: {name: delete_memory, args: {id: "{memory_id}"}}     # optional, as update: the lifecycle suite

``add`` is called once per turn (``per: turn``, the default) or once per session (``per: session``,
``{messages}``). A search reply is read from the tool's structured content, else from its text as
JSON; ``results`` names the list of memories in it, ``text`` and ``id`` their fields (``id``: the turn
id the server kept, for recall; without it, recall is null). Every name is checked against the
server's tool list when the layer starts: a missing tool fails the layer before any call.

A tool that reports an error (``isError``), a call past ``timeout_s`` and a server that died raise
:class:`McpError` with the reason: the benchmark records it per session or question as for any
layer (:func:`ragmem.memory.benchmark.run_conversation`).

The SDK is asynchronous; the layer is called synchronously, so one event loop runs in a thread of
its own, holding the connection open in one task from :meth:`McpMemory.__init__` to :meth:`close`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import tempfile
import threading
from typing import Any

from ragmem.config.sweep_settings import McpTool, MethodSpec, PLACEHOLDER
from ragmem.errors import ConfigError, failure_message

MISSING_SDK = "type: mcp needs the mcp package: pip install 'ragmem[mcp]'"
START_S = 60.0  # at most, for the server to start and list its tools (a first run may install or load a model)


class McpError(RuntimeError):
    """An MCP tool call failed: the tool's error, a timeout, or the server gone."""


def fill(template: Any, values: dict[str, Any]) -> Any:
    """``template`` with each ``"{name}"`` replaced by ``values[name]``: the value itself where the
    whole string is one placeholder, its text inside a longer string.

    >>> fill({"q": "{query}", "k": "{top_k}", "note": "user {user_id}", "fixed": 1}, {"query": "hi", "top_k": 3, "user_id": "u"})
    {'q': 'hi', 'k': 3, 'note': 'user u', 'fixed': 1}
    """
    if isinstance(template, str):
        whole = PLACEHOLDER.fullmatch(template)
        if whole:
            return values[whole.group(1)]
        return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), template)
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    return template


def _path(value: Any, dotted: str | None) -> Any:
    for key in (dotted.split(".") if dotted else []):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def memories(reply: Any, tool: McpTool) -> list[dict[str, Any]]:
    """The memories in a search tool's reply (its structured content, or its text parsed as JSON),
    as ``{text, id?}``.

    >>> tool = McpTool(name="s", results="hits", text="memory", id="meta.turn")
    >>> memories({"hits": [{"memory": "a cat", "meta": {"turn": "D1:2"}}]}, tool)
    [{'text': 'a cat', 'id': 'D1:2'}]
    """
    found = _path(reply, tool.results) if tool.results else reply
    if tool.results is None:
        for key in ("results", "result"):  # a bare list, {results: [...]}, or the SDK's {result: [...]} wrap
            if isinstance(found, dict) and key in found:
                found = found[key]
    if not isinstance(found, list):
        where = f"'{tool.results}'" if tool.results else "the reply (nor its results)"
        raise McpError(f"search tool {tool.name}: {where} is not a list of memories: {json.dumps(reply)[:200]}")
    out = []
    for item in found:
        text = item if isinstance(item, str) else _path(item, tool.text)
        memory: dict[str, Any] = {"text": "" if text is None else str(text)}
        turn = _path(item, tool.id) if tool.id and isinstance(item, dict) else None
        if turn is not None:
            memory["id"] = str(turn)
        out.append(memory)
    return out


class McpMemory:
    """A memory layer whose add, search and reset are tools of an MCP server (see the module)."""

    def __init__(self, spec: MethodSpec):
        self.spec, self.tools, self.timeout = spec, spec.tools, spec.timeout_s
        self.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") if spec.command else None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"ragmem-mcp-{spec.name}", daemon=True)
        self._thread.start()
        self._closing: asyncio.Event | None = None
        self._client: Any = None
        self._gone: str | None = None
        ready: concurrent.futures.Future = concurrent.futures.Future()
        self._held = asyncio.run_coroutine_threadsafe(self._hold(ready), self._loop)
        try:
            names = ready.result(timeout=START_S)
        except Exception as exc:
            if isinstance(exc, ConfigError):  # the mcp package is missing
                self.close()
                raise
            why = f"no tool list within {START_S:.0f} s" if isinstance(exc, TimeoutError) else failure_message(exc)
            message = f"{self._where()}: did not start ({why}){self._stderr_tail()}"
            self.close()
            raise McpError(message) from None
        for role in ("update", "delete"):  # (the lifecycle suite calls them when the layer has them)
            if getattr(self.tools, role) is not None:
                setattr(self, role, getattr(self, f"_{role}"))
        for role in ("add", "search", "reset", "update", "delete"):
            tool = getattr(self.tools, role)
            if tool is not None and tool.name not in names:
                self.close()
                raise ConfigError(f"methods[{spec.name}].tools.{role}.name: the server has no tool {tool.name!r} "
                                  f"(it has: {', '.join(sorted(names)) or 'none'})")

    def _where(self) -> str:
        return f"mcp server {' '.join(self.spec.command)!r}" if self.spec.command else f"mcp server {self.spec.url}"

    def _stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        try:
            self.stderr.flush()
            self.stderr.seek(0)
            lines = [line.strip() for line in self.stderr.read().splitlines() if line.strip()]
        except (OSError, ValueError):
            return ""
        return f"; its stderr ends: {lines[-1][:300]}" if lines else ""

    def _transport(self):
        from mcp import StdioServerParameters  # optional dependency: pip install 'ragmem[mcp]'
        from mcp.client.stdio import stdio_client  # (the same)

        if not self.spec.command:
            return self.spec.url
        command, *args = self.spec.command
        return stdio_client(StdioServerParameters(command=command, args=args, env=dict(os.environ)), errlog=self.stderr)

    async def _hold(self, ready: concurrent.futures.Future) -> None:
        """Connect, list the tools, and keep the connection open until :meth:`close`."""
        try:
            from mcp import Client  # optional dependency: pip install 'ragmem[mcp]'
        except ImportError:
            ready.set_exception(ConfigError(f"methods[].{MISSING_SDK}"))
            return
        self._closing = asyncio.Event()
        try:
            async with Client(self._transport(), read_timeout_seconds=self.timeout) as client:
                self._client = client
                listed = await client.list_tools()
                ready.set_result({tool.name for tool in listed.tools})
                await self._closing.wait()
        except BaseException as exc:  # the server went away (or never came): every later call says so
            self._gone = failure_message(exc) if isinstance(exc, Exception) else type(exc).__name__
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else McpError(self._gone))
        finally:
            self._client = None

    def _call(self, tool: McpTool, values: dict[str, Any]) -> Any:
        if self._client is None:
            raise McpError(f"{self._where()} is gone ({self._gone or 'closed'}){self._stderr_tail()}")
        future = asyncio.run_coroutine_threadsafe(self._client.call_tool(tool.name, fill(tool.args, values)), self._loop)
        try:
            result = future.result(timeout=self.timeout + 5)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpError(f"tool {tool.name}: no reply within {self.timeout:g} s") from None
        except Exception as exc:
            raise McpError(f"tool {tool.name}: {failure_message(exc)}{self._stderr_tail()}") from None
        text = " ".join(getattr(block, "text", "") for block in result.content).strip()
        if result.is_error:
            raise McpError(f"tool {tool.name} reported an error: {text[:300] or '(no message)'}")
        if result.structured_content is not None:
            return result.structured_content
        try:
            return json.loads(text) if text else None
        except json.JSONDecodeError:
            return text

    def add(self, messages, user_id, timestamp=None):
        if self.tools.add.per == "session":
            self._call(self.tools.add, {"messages": list(messages), "user_id": user_id, "timestamp": timestamp})
            return
        for m in messages:
            self._call(self.tools.add, {"content": m["content"], "id": m.get("id"), "role": m.get("role"),
                                        "speaker": m.get("speaker"), "timestamp": m.get("timestamp", timestamp),
                                        "user_id": user_id})

    def search(self, query, user_id, top_k):
        reply = self._call(self.tools.search, {"query": query, "user_id": user_id, "top_k": top_k})
        return memories(reply, self.tools.search)

    def reset(self):
        if self.tools.reset is not None:
            self._call(self.tools.reset, {})

    def _update(self, memory_id, text, user_id):
        self._call(self.tools.update, {"memory_id": memory_id, "text": text, "user_id": user_id})

    def _delete(self, memory_id, user_id):
        self._call(self.tools.delete, {"memory_id": memory_id, "user_id": user_id})

    def close(self) -> None:
        """Close the connection (a stdio server is stopped) and the layer's event loop."""
        if self._closing is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._closing.set)
        try:
            self._held.result(timeout=15)
        except Exception:  # (its failure was recorded as the reason the server is gone)
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if self.stderr is not None:
            self.stderr.close()
