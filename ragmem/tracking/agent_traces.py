"""A run's agent calls as MLflow traces, written in one batch (:func:`write`).

Each traced call is one trace: a root span ``agent`` (the query in; the answer, the number of
contexts and the error out), a child span per stage the agent reported (the retrieved contexts on
``retrieve``), linked to the run (``mlflow.sourceRun``), tagged with its example's id
(``ragmem.example_id``) and carrying that example's assessments (the judge's verdict, per-example
scores), so the run's Traces tab shows quality next to each call.

Why not MLflow's tracing API (``MlflowClient.start_trace``, ``start_span``, ``end_span``,
``end_trace``, then ``log_assessment``): it writes each span, each trace and each assessment in a
SQLite transaction of its own, through OpenTelemetry's exporter: 38 ms of CPU per trace of three
spans and 3.5 ms per assessment (200 traces of 4 assessments: 10.5 s of a sweep's or a live run's
logging). Here each trace is built as the entities MLflow stores, a ``TraceInfo`` (its tags, its
metadata and its assessments) and its spans in the form MLflow stores and reads back
(``Span.from_dict``), and written with the two calls MLflow's own exporter ends in: the tracing
client's ``start_trace`` per trace (one transaction with its assessments) and one ``log_spans`` for
every span of every trace: 10 ms a trace. ``tests/tracking/test_agent_traces.py`` writes the same
calls both ways and compares what MLflow reads back, so an MLflow release that stores traces
differently fails there.
"""

from __future__ import annotations

import base64
import json
import os
import time
from typing import Any, Callable

#: the span type of each stage an agent reports (MLflow's ``SpanType``); any other stage: ``UNKNOWN``
STAGE_SPAN_TYPES = {"retrieve": "RETRIEVER", "llm": "LLM", "embed": "EMBEDDING", "rerank": "RERANKER"}


def traced_calls(examples, outputs, limit: int) -> list[tuple[Any, Any]]:
    """The ``(example, output)`` pairs a run traces: timed agent calls, failed ones first, then the
    slowest, at most ``limit`` (a streamed run keeps those of its chunks so far and the next's)."""
    timed = [(ex, out) for ex, out in zip(examples, outputs) if out.started_at_ns is not None]
    timed.sort(key=lambda pair: (pair[1].error is None, -(pair[1].latency_s or 0.0)))
    return timed[:limit]


def _id(size: int) -> bytes:
    while True:  # OpenTelemetry's ids are never all zeros
        raw = os.urandom(size)
        if any(raw):
            return raw


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)  # (as MLflow stores a span's inputs and outputs)


class _Trace:
    """One trace's spans as MLflow's span dictionaries (the form ``Span.from_dict`` reads)."""

    def __init__(self, experiment_id: str):
        raw = _id(16)
        self.trace_id = "tr-" + raw.hex()  # (MLflow's id of a trace it made from an OpenTelemetry one)
        self._otel_id = base64.b64encode(raw).decode()
        self.experiment_id = experiment_id
        self.spans: list[dict[str, Any]] = []

    def span(self, name: str, span_type: str, start_ns: int, end_ns: int, parent: str | None = None,
             ok: bool = True, attributes: dict[str, str] | None = None) -> str:
        from mlflow.tracing.constant import SpanAttributeKey
        from mlflow.tracing.utils.default_log_level import default_log_level_for_span_type

        span_id = base64.b64encode(_id(8)).decode()
        known = {SpanAttributeKey.REQUEST_ID: json.dumps(self.trace_id), SpanAttributeKey.SPAN_TYPE: json.dumps(span_type),
                 SpanAttributeKey.LOG_LEVEL: json.dumps(int(default_log_level_for_span_type(span_type)))}
        if parent is None:
            known[SpanAttributeKey.EXPERIMENT_ID] = json.dumps(self.experiment_id)
        self.spans.append({
            "trace_id": self._otel_id, "span_id": span_id, "parent_span_id": parent, "name": name,
            "kind": "SPAN_KIND_INTERNAL", "start_time_unix_nano": start_ns, "end_time_unix_nano": end_ns,
            "status": {"code": "STATUS_CODE_OK" if ok else "STATUS_CODE_ERROR", "message": ""},
            "attributes": {**known, **(attributes or {})}, "events": []})
        return span_id


def agent_trace(experiment_id: str, ex, out) -> tuple[_Trace, dict[str, str], dict[str, str]]:
    """The trace of one timed agent call, with the request and response MLflow shows for it."""
    from mlflow.tracing.constant import SpanAttributeKey

    start = out.started_at_ns
    end = start + int((out.latency_s or 0.0) * 1e9)
    request = {"query": ex.query, "session_id": ex.session_id}
    response = {"answer": out.answer, "n_contexts": len(out.contexts), "error": out.error}
    trace = _Trace(experiment_id)
    root = trace.span("agent", "AGENT", start, end, ok=out.error is None, attributes={
        SpanAttributeKey.INPUTS: _dumps(request), SpanAttributeKey.OUTPUTS: _dumps(response),
        "attempts": json.dumps(str(out.attempts))})
    cursor = start
    for stage, seconds in out.timings_s.items():
        stop = min(end, cursor + int(seconds * 1e9))
        contexts = [c.to_dict() for c in out.contexts if stage == "retrieve" and c.source == "rag"]
        trace.span(stage, STAGE_SPAN_TYPES.get(stage, "UNKNOWN"), cursor, stop, parent=root,
                   attributes={SpanAttributeKey.OUTPUTS: _dumps(contexts)} if contexts else None)
        cursor = stop
    return trace, request, response


def plain_trace(experiment_id: str, request: dict[str, Any], response: dict[str, Any]) -> _Trace:
    """A trace of one span (type ``UNKNOWN``) made now, ``request`` in and ``response`` out: an
    example that has no trace of its own yet (a human label imported for a replayed run's example)."""
    from mlflow.tracing.constant import SpanAttributeKey

    now = time.time_ns()
    trace = _Trace(experiment_id)
    trace.span("labelled example", "UNKNOWN", now, now, attributes={
        SpanAttributeKey.INPUTS: _dumps(request), SpanAttributeKey.OUTPUTS: _dumps(response)})
    return trace


def write(uri: str, run_id: str, experiment_id: str, built: list[tuple[str, _Trace, dict, dict, str, list]]) -> list[str]:
    """Write traces built here: each ``(example id, trace, request, response, name, feedback)``, the
    feedback ragmem's :class:`ragmem.tracking.store.Feedback` items. Returns the traces' ids, in order.

    A store that keeps no spans of its own (MLflow's file store) gets each trace's spans as the
    trace's artifact instead, as MLflow's exporter does for it."""
    from mlflow.entities import AssessmentSource, Feedback, Span, Trace, TraceData, TraceInfo, TraceLocation, TraceState
    from mlflow.tracing.client import TracingClient
    from mlflow.tracing.constant import TRACE_SCHEMA_VERSION, TRACE_SCHEMA_VERSION_KEY, TraceMetadataKey, TraceTagKey
    from mlflow.tracing.utils import add_size_stats_to_trace_metadata
    from mlflow.tracing.utils.environment import resolve_env_metadata

    client = TracingClient(uri)
    environment = resolve_env_metadata()  # (the source, user and git commit MLflow's tracer records)
    written: list[tuple[Any, TraceData]] = []
    for example_id, trace, request, response, name, feedback in built:
        spans = [Span.from_dict(span) for span in trace.spans]
        root = trace.spans[0]
        shown_request, shown_response = _dumps(request), _dumps(response)
        info = TraceInfo(
            trace_id=trace.trace_id, trace_location=TraceLocation.from_experiment_id(experiment_id),
            request_time=root["start_time_unix_nano"] // 1_000_000,
            execution_duration=(root["end_time_unix_nano"] - root["start_time_unix_nano"]) // 1_000_000,
            state=TraceState.OK if root["status"]["code"] == "STATUS_CODE_OK" else TraceState.ERROR,
            request_preview=shown_request, response_preview=shown_response,
            trace_metadata={**environment, TraceMetadataKey.SOURCE_RUN: run_id, TraceMetadataKey.INPUTS: shown_request,
                            TraceMetadataKey.OUTPUTS: shown_response,
                            TRACE_SCHEMA_VERSION_KEY: str(TRACE_SCHEMA_VERSION)},
            tags={"ragmem.example_id": example_id, TraceTagKey.TRACE_NAME: name},
            assessments=[Feedback(name=f.name, value=f.value, rationale=f.rationale, trace_id=trace.trace_id,
                                  source=AssessmentSource(source_type=f.source_type, source_id=f.source_id))
                         for f in feedback])
        data = TraceData(spans=spans)
        add_size_stats_to_trace_metadata(Trace(info=info, data=data))
        written.append((client.start_trace(info), data))
    try:
        client.log_spans(experiment_id, [span for _, data in written for span in data.spans])
    except Exception as exc:  # a store without span storage: each trace's spans as its artifact (as MLflow's exporter)
        if not isinstance(exc, NotImplementedError) and "span logging is not supported" not in str(exc):
            raise
        for info, data in written:
            client._upload_trace_data(info, data)
    return [info.trace_id for info, _ in written]


def log(uri: str, run_id: str, experiment_id: str, timed: list[tuple[Any, Any]],
        assess: Callable[[list[str]], dict[str, list]] | None = None) -> int:
    """One trace per ``(example, output)`` of ``timed`` (:func:`traced_calls`), each with the
    assessments ``assess(example ids)`` gives for its example. Returns how many."""
    if not timed:
        return 0
    found = assess([str(ex.id) for ex, _ in timed]) if assess is not None else {}
    built = []
    for ex, out in timed:
        trace, request, response = agent_trace(experiment_id, ex, out)
        built.append((str(ex.id), trace, request, response, "agent", list(found.get(str(ex.id), ()))))
    write(uri, run_id, experiment_id, built)
    return len(timed)
