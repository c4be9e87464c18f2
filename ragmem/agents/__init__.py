"""Agents: what produces an answer and its contexts for a query. All are timed by the same runner.

    agent.type: replay   the dataset already holds answers and contexts (latency from latency_ms)
    agent.type: python   agent.target = "module:function" or "module:Class" (instantiated once
                         with agent.params), called as fn(query, session_id=..., history=...)
    agent.type: http     POST {query, session_id?, history?} to agent.url (see ragmem.agents.http)
    agent.type: reference  the bundled reference RAG + memory agent (ragmem.reference), set up by
                         the top-level sections corpus, retriever, memory, generator, embeddings

A live agent returns the answer as a string, or a dict/object with ``answer``, ``contexts``
(strings or ``{text, id?, source?, score?}``) and optional ``timings`` (stage -> seconds), or a tuple
``(answer, contexts[, timings])``. See :mod:`ragmem.agents.runner` for timing and failures.
"""

from __future__ import annotations

from typing import Any

from ragmem.agents.python import PythonAgent
from ragmem.agents.replay import ReplayAgent
from ragmem.errors import ConfigError

AGENT_TYPES = ("replay", "python", "reference", "http")
REFERENCE_SECTIONS = ("corpus", "retriever", "memory", "generator", "embeddings", "keywords")


def build_agent(config: dict[str, Any]):
    """The agent named by ``agent.type`` in a resolved config."""
    settings = config["agent"]
    kind = settings.get("type", "replay")
    if kind == "reference":
        return PythonAgent("ragmem.reference.agent:ReferenceAgent",
                           {"settings": {k: config[k] for k in REFERENCE_SECTIONS}})
    if kind == "replay":
        return ReplayAgent()
    if kind == "python":
        target = settings.get("target")
        if not target:
            raise ConfigError("agent.target: required for agent.type python (e.g. 'mypkg.agent:answer')")
        return PythonAgent(str(target), settings.get("params") or {})
    if kind == "http":
        from ragmem.agents.http import HttpAgent

        return HttpAgent(str(settings.get("url") or ""), settings.get("timeout_s"), settings.get("api_key_env"),
                         max_connections=int(settings.get("concurrency", 4)))
    raise ConfigError(f"agent.type: unknown agent {kind!r}; available: {', '.join(AGENT_TYPES)}")
