"""Memory layers of ``ragmem bench-memory`` (``bench.methods``): anything with ``add(messages,
user_id, timestamp)``, ``search(query, user_id, top_k)`` and optional ``reset()``:

- ``reference``: ragmem's BM25 memory (:class:`ragmem.reference.memory.BM25Memory`);
- ``full_context``: baseline, every turn in the prompt, most recent first until ``full_context_tokens``;
- ``no_memory``: baseline, nothing recalled;
- ``python``: ``target: module:Class`` (built with ``params``), a user's own layer (mem0-like);
- ``http``: ``url``: ``POST {url}/add {messages, user_id, timestamp}``, ``POST {url}/search
  {query, user_id, top_k}`` -> ``{"results": [{text, id?, score?, timestamp?}]}``, ``POST {url}/reset
  {}`` (``reset()`` takes no user: it clears the layer);
- ``mcp``: ``command: [...]`` (a stdio server ragmem starts and stops) or ``url:`` (streamable HTTP),
  with ``tools`` naming its add, search and reset tools and mapping ragmem's values onto their
  arguments (:mod:`ragmem.memory.mcp_layer`).

A layer with a ``close()`` method is closed when its method ends (an mcp layer's server stopped).

A message handed to ``add`` is ``{role, content, id, timestamp, speaker, name}``; ``content`` is the
turn as :func:`turn_text` writes it (its date, speaker and text), ``id`` the turn's id, which a
recalled memory carries back for recall to be measured.
"""

from __future__ import annotations

from typing import Any, Sequence

from ragmem.agents.python import resolve
from ragmem.config.loading import as_section
from ragmem.config.sweep_settings import MethodSpec
from ragmem.errors import ConfigError, failure_message
from ragmem.memory.mcp_layer import McpMemory
from ragmem.reference.memory import BM25Memory
from ragmem.text.keywords import KeywordExtractor

METHOD_TYPES = ("reference", "full_context", "no_memory", "python", "http", "mcp")


def turn_text(turn, date: str | None) -> str:
    caption = f" [shares an image: {turn.caption}]" if turn.caption else ""
    stamp = f"({date}) " if date else ""
    return f"{stamp}{turn.speaker}: {turn.text}{caption}"


class FullContext:
    """Baseline: every turn, newest first, until the token budget is spent."""

    def __init__(self, budget_tokens: int, count_tokens):
        self.budget, self.count = budget_tokens, count_tokens
        self._turns: dict[str, list[dict[str, Any]]] = {}

    def add(self, messages, user_id, timestamp=None):
        self._turns.setdefault(user_id, []).extend(
            {"id": m.get("id"), "text": m["content"], "timestamp": m.get("timestamp", timestamp)} for m in messages)

    def search(self, query, user_id, top_k):
        out, used = [], 0
        for memory in reversed(self._turns.get(user_id, [])):
            cost = self.count(memory["text"])
            if used + cost > self.budget:
                break
            out.append({**memory, "score": None})
            used += cost
        return out

    def reset(self):
        self._turns.clear()


class NoMemory:
    """Baseline: recalls nothing (what the generator knows without memory)."""

    def add(self, messages, user_id, timestamp=None):
        pass

    def search(self, query, user_id, top_k):
        return []

    def reset(self):
        pass


class HttpMemory:
    """A memory layer behind HTTP (see the module docstring for the routes)."""

    def __init__(self, url: str, timeout_s: float = 60.0):
        import httpx

        if not str(url).startswith(("http://", "https://")):
            raise ConfigError(f"methods[].url: expected an http(s) URL, got {url!r}")
        self.url = str(url).rstrip("/")
        self.client = httpx.Client(timeout=timeout_s)

    def _post(self, route: str, body: dict[str, Any]) -> Any:
        reply = self.client.post(f"{self.url}/{route}", json=body)
        reply.raise_for_status()
        return reply.json() if reply.content else None

    def add(self, messages, user_id, timestamp=None):
        self._post("add", {"messages": list(messages), "user_id": user_id, "timestamp": timestamp})

    def search(self, query, user_id, top_k):
        reply = self._post("search", {"query": query, "user_id": user_id, "top_k": top_k})
        results = reply.get("results") if isinstance(reply, dict) else reply
        if not isinstance(results, list):
            raise ValueError(f"search reply from {self.url} has no 'results' list")
        return results

    def reset(self):
        self._post("reset", {})


def method_specs(methods: list[Any]) -> list[MethodSpec]:
    """``bench.methods`` entries (a name, or ``{name, type, ...}``) with both name and type set."""
    specs = []
    for i, method in enumerate(methods):
        spec = as_section(MethodSpec, {"name": method} if isinstance(method, str) else method, f"bench.methods[{i}]")
        kind = spec.type or spec.name
        if kind not in METHOD_TYPES:
            raise ConfigError(f"bench.methods[{i}]: unknown memory layer {kind!r}; available: {', '.join(METHOD_TYPES)}")
        specs.append(spec.model_copy(update={"type": kind, "name": spec.name or kind}))
    if len({s.name for s in specs}) != len(specs):
        raise ConfigError("bench.methods: method names must differ")
    return specs


def build_layer(spec: MethodSpec, keywords: KeywordExtractor, count_tokens, full_context_tokens: int,
                folders: Sequence[str] = ()):
    """The memory layer of one ``bench.methods`` entry (see :func:`method_specs`)."""
    if spec.type == "reference":
        return BM25Memory(keywords)
    if spec.type == "full_context":
        return FullContext(spec.budget_tokens or full_context_tokens, count_tokens)
    if spec.type == "no_memory":
        return NoMemory()
    if spec.type == "http":
        return HttpMemory(str(spec.url), spec.timeout_s)  # (an http layer names its url: checked by the schema)
    if spec.type == "mcp":
        return McpMemory(spec)

    cls = resolve(str(spec.target), folders)  # (a python layer names its target: checked by the schema)
    try:
        layer = cls(**spec.params)
    except Exception as exc:
        raise ConfigError(f"methods[].target: building {spec.target} failed: {failure_message(exc)}") from None
    for name in ("add", "search"):
        if not callable(getattr(layer, name, None)):
            raise ConfigError(f"methods[].target: {spec.target} has no {name}() method")
    return layer
