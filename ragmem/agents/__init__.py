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

from ragmem.errors import AgentLoadError, failure_message
from ragmem.agents.python import PythonAgent
from ragmem.agents.replay import ReplayAgent
from ragmem.config.loading import RunConfig


def build_agent(config):
    """The agent named by ``agent.type`` in a config (a :class:`ragmem.config.loading.RunConfig`, or a
    dict of settings, validated the same way)."""
    cfg = config if isinstance(config, RunConfig) else RunConfig.from_dict(config)
    agent = cfg.agent
    if agent.type == "reference":
        from ragmem.reference.agent import ReferenceAgent  # (a slow import: its corpus and retrievers are its alone)

        try:  # the run's config holds the agent's sections, validated once (ReferenceSettings)
            return PythonAgent.of(ReferenceAgent(cfg), "reference")
        except Exception as exc:  # (a corpus that cannot be read, a retriever that cannot be built)
            raise AgentLoadError(f"agent: building the reference agent failed: {failure_message(exc)}") from None
    if agent.type == "python":
        return PythonAgent(agent.target, agent.params, cfg.import_paths)
    if agent.type == "http":
        from ragmem.agents.http import HttpAgent  # httpx (with click, rich and email: 80 ms, 18 MB): an HTTP agent's alone

        return HttpAgent(agent.url, agent.timeout_s, agent.api_key_env, max_connections=agent.concurrency)
    return ReplayAgent()
