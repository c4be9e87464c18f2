"""OpenTelemetry exports as data (``data.traces.files``): OTLP JSON files, one
``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``) per file or per line (the collector's
file exporter writes JSON Lines), read into :class:`ragmem.data.spans.Trace` for the same mapping
as MLflow's traces.

A span's type, inputs, outputs, documents, token counts and session are read from the attributes
the usual instrumentations write, the first found:

    type        mlflow.spanType; openinference.span.kind (Phoenix, OpenInference); traceloop.span.kind
                (OpenLLMetry); gen_ai.operation.name (the OpenTelemetry GenAI conventions);
                langfuse.observation.type
    inputs      mlflow.spanInputs; input.value; traceloop.entity.input; gen_ai.input.messages;
                langfuse.observation.input; gen_ai.prompt
    outputs     mlflow.spanOutputs; output.value; traceloop.entity.output; gen_ai.output.messages;
                langfuse.observation.output; gen_ai.completion
    documents   retrieval.documents.N.document.{content,id,score} (OpenInference), else the outputs
    tokens      llm.token_count.{prompt,completion,total}; gen_ai.usage.{input,output}_tokens
    session     session.id; gen_ai.conversation.id; langfuse.session.id; mlflow.trace.session
    user        user.id; enduser.id; langfuse.user.id; mlflow.trace.user

Ids are OTLP/JSON's hex (base64, as protobuf's own JSON writes them, is read too); a trace's id is
MLflow's for the same OTel trace (``tr-`` and the hex), so a trace exported to a file and the same
trace sent to MLflow are the same example. A file is read span by span and its spans grouped on disk
(spans of one trace may be anywhere in it), so a file of any size is read in bounded memory; a
malformed file is one line naming it and where (the span's number, the line).
"""

from __future__ import annotations

import base64
import binascii
import math
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from ragmem.data.jsonstream import JsonText, Unreadable
from ragmem.data.spans import decoded, sampled, Span, Trace
from ragmem.data.spill import SpanSpill
from ragmem.errors import DataError

_KINDS = {
    "traceloop.span.kind": {"workflow": "CHAIN", "task": "CHAIN", "agent": "AGENT", "tool": "TOOL"},
    "gen_ai.operation.name": {"chat": "LLM", "text_completion": "LLM", "generate_content": "LLM",
                              "embeddings": "EMBEDDING", "execute_tool": "TOOL", "invoke_agent": "AGENT",
                              "create_agent": "AGENT", "retrieval": "RETRIEVER", "retrieve": "RETRIEVER",
                              "search": "RETRIEVER", "memory": "MEMORY"},
    "langfuse.observation.type": {"generation": "LLM", "retriever": "RETRIEVER", "agent": "AGENT",
                                  "tool": "TOOL", "embedding": "EMBEDDING", "chain": "CHAIN"},
}
_INPUTS = ("mlflow.spanInputs", "input.value", "traceloop.entity.input", "gen_ai.input.messages",
           "langfuse.observation.input", "gen_ai.prompt")
_OUTPUTS = ("mlflow.spanOutputs", "output.value", "traceloop.entity.output", "gen_ai.output.messages",
            "langfuse.observation.output", "gen_ai.completion")
_TOKENS = {"input_tokens": ("llm.token_count.prompt", "gen_ai.usage.input_tokens"),
           "output_tokens": ("llm.token_count.completion", "gen_ai.usage.output_tokens"),
           "total_tokens": ("llm.token_count.total",)}
_SESSION = ("session.id", "gen_ai.conversation.id", "langfuse.session.id", "mlflow.trace.session")
_USER = ("user.id", "enduser.id", "langfuse.user.id", "mlflow.trace.user")


def any_value(value: dict[str, Any]) -> Any:
    """An OTLP ``AnyValue`` as plain data."""
    if not isinstance(value, dict) or not value:
        return None
    kind, inner = next(iter(value.items()))
    if kind == "intValue":
        return _integer(inner, "intValue")
    if kind == "doubleValue":
        number = _number(inner, "doubleValue")
        return number if math.isfinite(number) else None  # (1e999: not a measurement of anything)
    if kind == "arrayValue":
        return [any_value(v) for v in (inner or {}).get("values", [])]
    if kind == "kvlistValue":
        return {kv["key"]: any_value(kv.get("value", {})) for kv in (inner or {}).get("values", [])}
    return inner  # stringValue, boolValue, bytesValue (base64 text)


class Malformed(ValueError):
    """A span that is not OTLP: said with the file and the span's number (:func:`read`)."""


def _integer(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or (isinstance(value, str) and not (
            value.strip().lstrip("-").isdigit() and len(value.strip()) <= 30)):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
        raise Malformed(f"{field}: expected an integer, got {shown}")
    return int(value)


def _number(value: Any, field: str) -> float:
    try:
        return float(value) if not isinstance(value, bool) and len(str(value)) <= 40 else float("x")
    except (TypeError, ValueError):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
        raise Malformed(f"{field}: expected a number, got {shown}") from None


def attributes(items: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {item["key"]: any_value(item.get("value", {})) for item in items or () if "key" in item}


def hex_id(value: Any) -> str:
    """An OTLP id as lowercase hex: given as hex (OTLP/JSON) or base64 (protobuf's JSON)."""
    text = str(value or "")
    if text and len(text) in (16, 32) and all(c in "0123456789abcdefABCDEF" for c in text):
        return text.lower()
    try:
        return base64.b64decode(text, validate=True).hex()
    except (binascii.Error, ValueError):
        return text


def _first(attrs: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((attrs[k] for k in keys if attrs.get(k) not in (None, "")), None)


def span_type(attrs: dict[str, Any]) -> str:
    if attrs.get("mlflow.spanType"):
        return str(decoded(attrs["mlflow.spanType"]))
    if attrs.get("openinference.span.kind"):
        return str(attrs["openinference.span.kind"]).upper()
    for key, kinds in _KINDS.items():
        if attrs.get(key):
            return kinds.get(str(attrs[key]).lower(), "UNKNOWN")
    return "UNKNOWN"


def _documents(attrs: dict[str, Any]) -> list[dict[str, Any]] | None:
    """OpenInference's flattened ``retrieval.documents.N.document.*`` as documents, in N's order."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith("retrieval.documents."):
            index, _, field = key[len("retrieval.documents."):].partition(".document.")
            if index.isdigit() and field in ("content", "id", "score", "metadata"):
                found.setdefault(int(index), {})["text" if field == "content" else field] = decoded(value) \
                    if field == "metadata" else value
    return [found[i] for i in sorted(found)] or None


def _status(span: dict[str, Any]) -> str:
    code = (span.get("status") or {}).get("code", 0)
    return {2: "ERROR", "STATUS_CODE_ERROR": "ERROR", 1: "OK", "STATUS_CODE_OK": "OK"}.get(code, "UNSET")


def _error(span: dict[str, Any]) -> str | None:
    for event in span.get("events") or ():
        if event.get("name") == "exception":
            attrs = attributes(event.get("attributes"))
            shown = ": ".join(str(attrs[k]) for k in ("exception.type", "exception.message") if attrs.get(k))
            if shown:
                return shown
    return (span.get("status") or {}).get("message") or None


def _nanoseconds(value: Any, field: str) -> int:
    try:
        return _integer(value, field)
    except Malformed:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
        raise Malformed(f"{field}: expected nanoseconds since 1970, got {shown}") from None


def as_span(span: dict[str, Any]) -> tuple[str, Span, dict[str, Any]]:
    """One OTLP span: its trace's hex id, the :class:`Span`, its attributes (:class:`Malformed`: why it
    is not one)."""
    if not isinstance(span, dict):
        raise Malformed(f"expected a span object, got {'null' if span is None else type(span).__name__}")
    if not isinstance(span.get("attributes") or [], list):
        raise Malformed(f"attributes: expected a list, got {type(span['attributes']).__name__}")
    attrs = attributes(span.get("attributes"))
    kind = span_type(attrs)
    outputs = decoded(_first(attrs, _OUTPUTS))
    if kind == "RETRIEVER":
        outputs = _documents(attrs) or outputs
    tokens = {name: _first(attrs, keys) for name, keys in _TOKENS.items() if _first(attrs, keys) is not None}
    if not tokens and isinstance(decoded(attrs.get("mlflow.chat.tokenUsage")), dict):
        tokens = decoded(attrs["mlflow.chat.tokenUsage"])
    end = span.get("endTimeUnixNano")
    start = _nanoseconds(span.get("startTimeUnixNano", 0), "startTimeUnixNano")
    return hex_id(span.get("traceId")), Span(
        hex_id(span.get("spanId")), hex_id(span["parentSpanId"]) if span.get("parentSpanId") else None,
        str(span.get("name", "")), kind, start, _nanoseconds(end, "endTimeUnixNano") if end else None,
        _status(span), _error(span), decoded(_first(attrs, _INPUTS)), outputs, tokens or None), attrs


class _Walk:
    """The spans of an OTLP JSON file, one ``ExportTraceServiceRequest`` or one per line, read one at
    a time (:class:`ragmem.data.jsonstream.JsonText`): what is not OTLP is one line naming where."""

    def __init__(self, text: JsonText):
        self.text, self.count = text, 0

    def spans(self) -> Iterator[Any]:
        text = self.text
        while text.peek() is not None:
            line, found = text.line, False
            if text.peek() == "{":
                for key in text.members():
                    if key == "resourceSpans" and text.peek() == "[":
                        found = True
                        for _ in text.items():
                            yield from self._resource()
                    else:
                        text.value(f"the value of {key!r}")
            else:
                text.value("a request")
            if not found:
                raise Unreadable(f"line {line}: expected OTLP JSON ({{\"resourceSpans\": [...]}})")

    def _resource(self) -> Iterator[Any]:
        text = self.text
        if text.peek() != "{":
            got = text.value("a resource")
            raise Unreadable(f"line {text.line}: resourceSpans: expected objects with scopeSpans, got {_kind(got)}")
        for key in text.members():
            if key == "scopeSpans" and text.peek() == "[":
                for _ in text.items():
                    yield from self._scope()
            elif (got := text.value(f"the value of {key!r}")) is not None and key == "scopeSpans":
                raise Unreadable(f"line {text.line}: resourceSpans: expected objects with scopeSpans, got "
                                 f"scopeSpans {_kind(got)}")

    def _scope(self) -> Iterator[Any]:
        text = self.text
        if text.peek() != "{":
            text.value("a scope")
            raise Unreadable(f"line {text.line}: scopeSpans: expected objects with spans")
        for key in text.members():
            if key == "spans" and text.peek() == "[":
                for _ in text.items():
                    self.count += 1
                    yield text.value(f"span {self.count}")
            elif text.value(f"the value of {key!r}") is not None and key == "spans":
                raise Unreadable(f"line {text.line}: scopeSpans: expected objects with spans")


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def read(path: str | Path, *, since: datetime | None = None, until: datetime | None = None, share: float = 1.0,
         seed: int = 0, limit: int | None = None, spill_dir: str | Path | None = None) -> Iterator[Trace]:
    """The traces of an OTLP JSON file whose root started in ``[since, until)``, ordered by start,
    at most ``limit`` of the ``share`` :func:`ragmem.data.spans.sampled` keeps with ``seed``. The file
    is read span by span and its spans grouped on disk (:class:`ragmem.data.spill.SpanSpill`, in
    ``spill_dir``): memory does not grow with the file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(str(path), "no such file (data.traces.files)")
    with SpanSpill(spill_dir) as spill:
        try:
            with open(path, "rb") as handle:
                walk = _Walk(JsonText(handle, str(path)))
                for raw in walk.spans():
                    try:
                        trace_id, span, attrs = as_span(raw)
                    except Malformed as exc:
                        raise DataError(str(path), f"span {walk.count}: {exc}") from None
                    except RecursionError:
                        raise DataError(str(path), f"span {walk.count}: its attributes nest deeper than can be read") from None
                    meta = {key: str(_first(attrs, names)) for key, names in (("session_id", _SESSION), ("user_id", _USER))
                            if _first(attrs, names) is not None}
                    spill.add(trace_id, span, meta)
        except Unreadable as exc:
            raise DataError(str(path), str(exc)) from None
        except OSError as exc:
            raise DataError(str(path), f"cannot be read as OTLP JSON: {exc}") from None
        kept = 0
        for trace_id, start_ms, spans, meta in spill.traces(
                None if since is None else since.timestamp() * 1000, None if until is None else until.timestamp() * 1000):
            mlflow_id = f"tr-{trace_id}"
            if not sampled(mlflow_id, share, seed):
                continue
            if limit is not None and kept >= limit:
                return
            kept += 1
            yield Trace(mlflow_id, start_ms, spans, session_id=meta.get("session_id"), user_id=meta.get("user_id"))
