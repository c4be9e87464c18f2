"""The in-memory shape of an evaluation example and of what an agent returns for it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

#: Where a context item came from. ``None`` when the dataset does not say.
CONTEXT_SOURCES = ("rag", "memory_short", "memory_long")

#: Stages an agent may report timings for (seconds); others are kept too, these are the known ones.
STAGES = ("embed", "retrieve", "rerank", "llm")


@dataclass(frozen=True, slots=True)
class Context:
    """One retrieved chunk or recalled memory."""

    text: str
    id: str | None = None
    source: str | None = None
    score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in (("text", self.text), ("id", self.id), ("source", self.source),
                                  ("score", self.score)) if v is not None}


@dataclass(slots=True)
class Example:
    """One evaluation example, after loading and validation.

    ``generated_answer``/``contexts``/``latency_ms``/``timings_ms`` are what was recorded when the
    answers were produced earlier (replay); a live agent replaces them.
    """

    id: str
    query: str
    reference_answer: str | None
    contexts: list[Context] = field(default_factory=list)
    generated_answer: str | None = None
    label: int | None = None
    latency_ms: float | None = None
    timings_ms: dict[str, float] | None = None
    session_id: str | None = None
    history: list[dict[str, str]] | None = None
    relevant_context_ids: list[str] | None = None
    relevance: dict[str, float] | None = None
    source_file: str = ""
    record: int = 0
    cluster: str | None = None  # stats.cluster_by's value: examples resampled together
    label_answer: str | None = None  # answer_digest of the answer the label judged (None: not known)
    #: production traffic (:mod:`ragmem.data.spans`): the agent call that failed when the answer was
    #: made (replayed as a failed call), the trace it came from, its user and token usage
    agent_error: str | None = None
    trace_id: str | None = None
    user_id: str | None = None
    tokens: dict[str, int] | None = None

    def gold_relevance(self) -> dict[str, float] | None:
        """Graded gold relevance by context id: ``relevance`` if given, else ``relevant_context_ids``
        as grade 1, else ``None`` (no gold ids)."""
        if self.relevance is not None:
            return dict(self.relevance)
        if self.relevant_context_ids is not None:
            return {cid: 1.0 for cid in self.relevant_context_ids}
        return None


@dataclass(slots=True)
class AgentOutput:
    """What timing one agent call produced for one example.

    ``latency_s`` is ``None`` when it was not measured (replay without ``latency_ms``): never a
    made-up number. ``error`` holds the reason when the call failed; answer and contexts are then
    empty and the example is excluded from quality metrics (and counted).
    """

    example_id: str
    answer: str | None
    contexts: list[Context]
    latency_s: float | None
    timings_s: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    started_at_ns: int | None = None   # wall clock (time.time_ns) when the last attempt started
    attempts: int = 1


#: the per-example table's columns of labels that do not judge the answer they sit beside: a label set
#: aside (it judged another answer: its value, the ``label`` cell then empty), and a label that names
#: no answer (True: no ``generated_answer`` nor ``label_answer_sha256`` in its record)
LABEL_SET_ASIDE, LABEL_UNBOUND = "label_set_aside", "label_unbound"


def answer_digest(text: str) -> str:
    """What binds a label to the answer it judged: the SHA-256 of the answer's text (UTF-8, as it is).

    >>> answer_digest("Paris")[:12]
    '5dd272b4f316'
    """
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def example_keys(ids: Iterable[Any]) -> np.ndarray:
    """Each example id's 64-bit key (BLAKE2b of its text): what its Poisson weights are drawn from.

    >>> bool(example_keys(["q1"])[0] == example_keys(["x", "q1"])[1])
    True
    """
    return np.array([int.from_bytes(hashlib.blake2b(str(i).encode("utf-8"), digest_size=8).digest(), "little")
                     for i in ids], dtype=np.uint64)
