"""An application's traffic for the tests of ``data.traces``: a plan of traces (a query, retrieved
documents with ids, a recalled memory, an answer, two sessions, some that raised, every span's start
and end), written with the real MLflow tracing API into a tracking store (:func:`write_mlflow`), or
with the real OpenTelemetry SDK as an OTLP JSON file with OpenInference attributes (:func:`write_otlp`),
the same traces with the same times."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

MS = 1_000_000


@dataclass
class Planned:
    index: int
    query: str
    answer: str
    documents: list[tuple[str, str]]   # (id, text)
    memory: str
    session: str
    user: str
    start_ns: int
    raised: bool

    # each span's (start, end) in ns: the root, memory, retriever, llm
    def times(self) -> dict[str, tuple[int, int]]:
        t, i = self.start_ns, self.index
        return {"memory": (t + 1 * MS, t + 3 * MS + i * 1000), "retrieve": (t + 4 * MS, t + 9 * MS + i * 7000),
                "llm": (t + 10 * MS, t + 30 * MS + i * 11000), "root": (t, t + 32 * MS + i * 13000)}


def plan(n: int, raised: int = 5, start_ns: int | None = None, step_ns: int = 10**9, wrong: int = 0,
         first: int = 0) -> list[Planned]:
    """``n`` traces ``step_ns`` apart from ``start_ns`` (default: an hour ago), the first ``raised`` of
    every ``n // raised`` raising; ``wrong`` of them (the first) answering WRONG; numbered from ``first``."""
    import time

    start_ns = start_ns if start_ns is not None else time.time_ns() - 3600 * 10**9
    step = max(1, n // max(raised, 1))
    out = []
    for i in range(first, first + n):
        city = ("Paris", "Berlin", "Rome", "Madrid")[i % 4]
        country = ("France", "Germany", "Italy", "Spain")[i % 4]
        out.append(Planned(
            i, f"What is the capital of {country}? (question #{i})",
            f"WRONG: the capital of {country} is Atlantis (#{i})." if i - first < wrong else
            f"The capital of {country} is {city} (#{i}).",
            [(f"doc-{i % 4}", f"{city} is the capital of {country}."), (f"doc-x{i % 3}", "Rivers flow to the sea.")],
            f"The user asked about {country} before.", f"session-{i % 2}", f"user-{i % 3}",
            start_ns + (i - first) * step_ns, raised > 0 and (i - first) % step == 0 and (i - first) // step < raised))
    return out


@contextlib.contextmanager
def writing_to(uri: str):
    """MLflow's tracing API pointed at ``uri`` while the block writes, then put back as it was
    (``mlflow.set_tracking_uri`` sets MLFLOW_TRACKING_URI too: a test that left it set sent the later
    tests of its worker to that store)."""
    import mlflow

    from ragmem.tracking.store import prepare_local_store

    prepare_local_store(uri)  # (a new SQLite store copied, not migrated: the application's store is not under test)
    previous, variable = mlflow.get_tracking_uri(), os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(uri)
    try:
        yield
        mlflow.flush_trace_async_logging()
    finally:
        mlflow.set_tracking_uri(previous)
        if variable is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = variable


def write_mlflow(uri: str, experiment: str, traces: list[Planned]) -> list[str]:
    """The plan through MLflow's tracing API into ``uri``; the trace ids, in plan order."""
    import mlflow
    from mlflow.entities import Document, SpanType

    with writing_to(uri):
        experiment_id = mlflow.set_experiment(experiment).experiment_id
        ids = []
        for p in traces:
            times = p.times()
            root = mlflow.start_span_no_context("agent", span_type=SpanType.AGENT, inputs={"query": p.query},
                                                metadata={"mlflow.trace.session": p.session, "mlflow.trace.user": p.user},
                                                experiment_id=experiment_id, start_time_ns=times["root"][0])
            memory = mlflow.start_span_no_context("recall", span_type=SpanType.MEMORY, parent_span=root,
                                                  inputs={"query": p.query}, start_time_ns=times["memory"][0])
            memory.end(outputs=[p.memory], end_time_ns=times["memory"][1])
            retrieve = mlflow.start_span_no_context("retrieve", span_type=SpanType.RETRIEVER, parent_span=root,
                                                    inputs={"query": p.query}, start_time_ns=times["retrieve"][0])
            retrieve.end(outputs=[Document(page_content=text, id=cid) for cid, text in p.documents],
                         end_time_ns=times["retrieve"][1])
            llm = mlflow.start_span_no_context("generate", span_type=SpanType.LLM, parent_span=root,
                                               inputs={"prompt": p.query}, start_time_ns=times["llm"][0])
            llm.set_attribute("mlflow.chat.tokenUsage", {"input_tokens": 40 + p.index, "output_tokens": 9,
                                                         "total_tokens": 49 + p.index})
            llm.end(outputs=p.answer, end_time_ns=times["llm"][1])
            if p.raised:
                try:
                    raise RuntimeError(f"the agent broke on question {p.index}")
                except RuntimeError as exc:
                    root.record_exception(exc)
                root.end(end_time_ns=times["root"][1])
            else:
                root.end(outputs={"answer": p.answer}, end_time_ns=times["root"][1])
            ids.append(root.trace_id)
    return ids


def write_otlp(path: Path, traces: list[Planned]) -> Path:
    """The plan through the OpenTelemetry SDK (OpenInference attributes), exported as OTLP JSON by
    the OTLP exporter's own encoder (one ExportTraceServiceRequest)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Status, StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("ragmem-tests")
    for p in traces:
        times = p.times()
        root = tracer.start_span("agent", start_time=times["root"][0], attributes={
            "openinference.span.kind": "AGENT", "input.value": json.dumps({"query": p.query}),
            "input.mime_type": "application/json", "session.id": p.session, "user.id": p.user})
        context = trace.set_span_in_context(root)
        memory = tracer.start_span("recall", context=context, start_time=times["memory"][0], attributes={
            "openinference.span.kind": "MEMORY", "input.value": p.query, "output.value": json.dumps([p.memory])})
        memory.end(end_time=times["memory"][1])
        attributes = {"openinference.span.kind": "RETRIEVER", "input.value": p.query}
        for i, (cid, text) in enumerate(p.documents):
            attributes[f"retrieval.documents.{i}.document.id"] = cid
            attributes[f"retrieval.documents.{i}.document.content"] = text
        retrieve = tracer.start_span("retrieve", context=context, start_time=times["retrieve"][0], attributes=attributes)
        retrieve.end(end_time=times["retrieve"][1])
        llm = tracer.start_span("generate", context=context, start_time=times["llm"][0], attributes={
            "openinference.span.kind": "LLM", "input.value": p.query, "output.value": p.answer,
            "llm.token_count.prompt": 40 + p.index, "llm.token_count.completion": 9,
            "llm.token_count.total": 49 + p.index})
        llm.end(end_time=times["llm"][1])
        if p.raised:
            try:
                raise RuntimeError(f"the agent broke on question {p.index}")
            except RuntimeError as exc:
                root.record_exception(exc)
                root.set_status(Status(StatusCode.ERROR, str(exc)))
        else:
            root.set_attribute("output.value", json.dumps({"answer": p.answer}))
            root.set_status(Status(StatusCode.OK))
        root.end(end_time=times["root"][1])
    request = MessageToDict(encode_spans(exporter.get_finished_spans()))
    path.write_text(json.dumps(request), encoding="utf-8")
    return path
