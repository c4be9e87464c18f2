"""Replay: answers and contexts recorded in the dataset; nothing is called."""

from __future__ import annotations

from ragmem.schema import AgentOutput, Example


class ReplayAgent:
    name = "replay"
    live = False

    def replay(self, example: Example) -> AgentOutput:
        """Latency comes from ``latency_ms`` when recorded; otherwise it is not measured (None). A
        recorded failure (``agent_error``) is a failed call with that reason."""
        timings = {k: v / 1000.0 for k, v in (example.timings_ms or {}).items()}
        latency = None if example.latency_ms is None else example.latency_ms / 1000.0
        if example.agent_error is not None:  # the call failed when the answer was made (a trace in error)
            return AgentOutput(example.id, None, [], latency, timings, error=example.agent_error)
        return AgentOutput(example.id, example.generated_answer, list(example.contexts), latency, timings)

    def signature(self) -> str:
        return "agent:replay"
