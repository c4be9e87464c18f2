"""The settings of production traffic as data: ``data.traces``, the traces an application wrote to
MLflow (or exported as OpenTelemetry OTLP JSON files) read as the examples of a run, and the mapping
from their spans to an example's fields. Part of the settings schema (:mod:`ragmem.config.settings`,
which holds them); the reading is :mod:`ragmem.tracking.traces` and :mod:`ragmem.data.otlp`, the
mapping :mod:`ragmem.data.spans`.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Annotated, Literal, Optional

from annotated_types import Ge, Le
from pydantic import field_validator, model_validator

from ragmem.config.sections import Positive, Section, setting, Share

Turns = Annotated[int, Ge(0), Le(1000)]  # data.traces.history: 0 (none) to 1,000 earlier turns

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """An ISO time (``2026-12-03T00:00:00Z``; without a zone: UTC) or a duration before ``now``
    (``24h``, ``30m``, ``7d``, ``90s``, ``2w``), as an aware UTC datetime; ValueError otherwise.

    >>> parse_time("24h", datetime(2026, 12, 4, tzinfo=timezone.utc)).isoformat()
    '2026-12-03T00:00:00+00:00'
    """
    match = _DURATION.match(text)
    if match:
        now = now or datetime.now(timezone.utc)
        return now - timedelta(seconds=float(match.group(1)) * _UNIT_S[match.group(2)])
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"expected an ISO time (2026-12-03T00:00:00Z) or a duration (24h, 30m, 7d), "
                         f"got {text!r}") from None
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)


class TraceMapping(Section):
    """Which parts of a trace are which fields of an example. A path is dotted keys and list indices
    into the root span's inputs or outputs (``question``, ``messages.-1.content``); null: found by
    the usual names (:mod:`ragmem.data.spans`)."""

    query: Optional[str] = setting(None, "path into the root span's inputs to the query; null: found "
                                         "(a lone text, query/question/input/prompt, the last user message)")
    answer: Optional[str] = setting(None, "path into the root span's outputs to the answer; null: found "
                                          "(a text, answer/output/response/content, choices.0.message.content)")
    retriever: list[str] = setting(["RETRIEVER"], "span types whose outputs are the retrieved contexts "
                                                  "(source rag; documents' ids kept for the ranking metrics)")
    memory: list[str] = setting(["MEMORY"], "span types whose outputs are recalled memories")
    memory_source: Literal["memory_short", "memory_long"] = setting("memory_long", "the source of a "
                                                                    "recalled memory (per-source metrics)")
    stages: dict[str, str] = setting(
        {"RETRIEVER": "retrieve", "MEMORY": "memory", "RERANKER": "rerank", "EMBEDDING": "embed",
         "LLM": "llm", "CHAT_MODEL": "llm"},
        "span type -> stage: the durations of a trace's spans of each type, summed, are its stage latencies")


class TracesSettings(Section):
    """Where the traces are: an MLflow experiment (``experiment``) or OTLP JSON files (``files``)."""

    experiment: Optional[str] = setting(None, "the MLflow experiment the application traces into (its name)")
    files: list[str] = setting([], "OpenTelemetry OTLP JSON files (or JSON Lines of them), instead of an experiment")
    tracking_uri: Optional[str] = setting(None, "the MLflow tracking URI that holds the experiment; "
                                                "null: this run's own (tracking.uri)")
    filter: Optional[str] = setting(None, "an MLflow trace search filter, ANDed with the window "
                                          "(e.g. \"tags.env = 'prod'\")")
    since: Optional[str] = setting(None, "traces started at or after: an ISO time, or a duration before now (24h)")
    until: Optional[str] = setting(None, "traces started before: an ISO time, or a duration before now; "
                                         "null: when the run starts (an incremental window: lag before it)")
    lag: str = setting("2m", "an incremental window without until ends this long before the run starts (a "
                             "duration: 2m, 30s, 0s): a trace still being written when its window is read falls "
                             "in the next window")
    incremental: bool = setting(False, "each run the traces that arrived since the last run of this config "
                                       "ended its window (the watermark, kept in the MLflow experiment): "
                                       "ragmem serve sets it; the first window starts at since")
    max: Positive = setting(100_000, "at most this many traces (the earliest in the window)")
    sample: Share = setting(1.0, "the share of traces kept, drawn by a seeded hash of the trace id")
    seed: int = setting(0, "the seed of the sample")
    page_size: Positive = setting(500, "traces read from MLflow per request (memory stays bounded)")
    history: Turns = setting(10, "the earlier turns of its session each trace keeps as its conversation "
                                 "(history: what the conversation metrics read): the root's messages when "
                                 "it has them, else the session's earlier traces of the window; 0: none")
    write_back: bool = setting(True, "write each judged trace's verdict and scores back onto it as MLflow assessments")
    mapping: TraceMapping = setting(TraceMapping, "spans -> fields")

    @field_validator("since", "until")
    @classmethod
    def _time(cls, value):
        if value is not None:
            parse_time(value)
        return value

    @field_validator("lag")
    @classmethod
    def _lag(cls, value):
        if not _DURATION.match(str(value)):
            raise ValueError(f"expected a duration (2m, 30s, 0s), got {value!r}")
        return value

    @model_validator(mode="after")
    def _one_source(self):
        if self.experiment and self.files:
            raise ValueError("data.traces: an experiment or files, not both")
        if self.incremental and not self.experiment:
            raise ValueError("data.traces.incremental: windows of an MLflow experiment's traces (set data.traces.experiment)")
        return self

    @property
    def given(self) -> bool:
        return bool(self.experiment or self.files)
