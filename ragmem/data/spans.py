"""Traces as examples: the spans of one trace (read from MLflow by :mod:`ragmem.tracking.traces`, or
from OTLP JSON files by :mod:`ragmem.data.otlp`) mapped to one record of ragmem's data format.

The mapping (``data.traces.mapping``, each part overridable):

    query        the root span's inputs: a path (``mapping.query``), else a lone text, else the first of
                 query, question, input, user_input, prompt, else the last user message of ``messages``
    answer       the root span's outputs: a path (``mapping.answer``), else a text, else the first of
                 answer, output, response, content, text, result, else choices.0.message.content, else
                 the last assistant message
    contexts     the outputs of the spans whose type is in ``mapping.retriever`` (source ``rag``), then
                 of those in ``mapping.memory`` (source ``mapping.memory_source``), in start order: a
                 document's text (page_content, content, text, memory) with its id (id, else the
                 metadata's id, chunk_id, doc_id, doc_uri), kept for the ranking metrics
    latency_ms   the root span's duration (the agent is not called: the trace is the answer)
    timings_ms   per stage (``mapping.stages``: span type -> stage), the durations of its spans, summed
    tokens       the trace's token usage (input, output, total), else the spans' own, summed
    session_id, user_id, trace_id
                 from the trace's metadata; the trace id is the example's id
    history      the root's ``messages`` before its last user message (user and assistant turns), when
                 it has them: the conversation the turn belongs to (else :mod:`ragmem.data.conversations`
                 builds it from the session's earlier traces)

A trace whose root span ended in error, or that has no root span or no answer in its root's outputs,
is a failed agent call (``agent_error``, its reason): counted and named by its trace id in the run,
never dropped. Nothing here imports MLflow: spans arrive as :class:`Span`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ragmem.data.fields import lone_surrogate
from ragmem.errors import escaped_surrogates

QUERY_KEYS = ("query", "question", "input", "user_input", "prompt")
ANSWER_KEYS = ("answer", "output", "response", "content", "text", "result")
TEXT_KEYS = ("page_content", "content", "text", "memory", "document")
ID_KEYS = ("id", "chunk_id", "doc_id", "document_id", "doc_uri", "source")


@dataclass
class Span:
    """One span, whatever wrote it: its type as MLflow names them (``RETRIEVER``, ``MEMORY``,
    ``LLM``, ...; ``UNKNOWN`` when nothing says), its inputs and outputs as plain data, its status
    (``OK``, ``ERROR``, ``UNSET``) with the error's message, and its token usage when it reports one."""

    span_id: str
    parent_id: str | None
    name: str
    type: str
    start_ns: int
    end_ns: int | None
    status: str = "OK"
    error: str | None = None
    inputs: Any = None
    outputs: Any = None
    tokens: dict[str, Any] | None = None  # (as exported: checked into counts by to_record)


@dataclass
class Trace:
    """One trace: its id, start (ms since the epoch), spans, and what its metadata says."""

    trace_id: str
    start_ms: int
    spans: list[Span]
    session_id: str | None = None
    user_id: str | None = None
    tokens: dict[str, Any] | None = None  # (as exported: checked into counts by to_record)
    extra: dict[str, Any] = field(default_factory=dict)
    unreadable: str | None = None  # why its spans could not be read (the trace is then a named failure)


def sampled(trace_id: str, share: float, seed: int) -> bool:
    """Whether ``trace_id`` is in the ``share`` drawn with ``seed`` (``data.traces.sample``): a
    BLAKE2b hash of both, as a number in [0, 1), below ``share`` (the same trace is in or out on
    every run with that seed, wherever it is read from).

    >>> sampled("tr-1", 1.0, 0), sampled("tr-1", 0.0, 0)
    (True, False)
    """
    if share >= 1.0:
        return True
    digest = hashlib.blake2b(f"{seed}:{trace_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0 ** 64 < share


def root_of(spans: Iterable[Span]) -> Span | None:
    """The span without a parent among ``spans`` (the earliest, when several)."""
    spans = list(spans)
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if s.parent_id is None or s.parent_id not in ids]
    return min(roots, key=lambda s: s.start_ns) if roots else None


def at_path(value: Any, path: str) -> Any:
    """The value at a dotted path of keys and list indices (``messages.-1.content``); None where
    the path leads nowhere.

    >>> at_path({"messages": [{"content": "a"}, {"content": "b"}]}, "messages.-1.content")
    'b'
    """
    for part in path.split("."):
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list):
            try:
                value = value[int(part)]
            except (ValueError, IndexError):
                return None
        else:
            return None
    return value


def decoded(value: Any) -> Any:
    """A JSON text of an object, a list or a string (as OTel attributes and MLflow span attributes
    carry inputs, outputs and types) as its value; anything else as it is (a plain text stays text,
    even ``42``)."""
    if isinstance(value, str) and value[:1] in "{[\"":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _message(messages: Any, role: str) -> str | None:
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, Mapping) and message.get("role") == role and isinstance(message.get("content"), str):
                return message["content"]
    return None


def find_history(inputs: Any) -> list[dict[str, str]] | None:
    """The user and assistant messages of the root's ``messages`` before its last user message (the
    turns the application sent with the question), or ``None`` when there are none.

    >>> find_history({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "I am Ann"},
    ...                            {"role": "assistant", "content": "Hi Ann"}, {"role": "user", "content": "My name?"}]})
    [{'role': 'user', 'content': 'I am Ann'}, {'role': 'assistant', 'content': 'Hi Ann'}]
    """
    inputs = decoded(inputs)
    messages = inputs.get("messages") if isinstance(inputs, Mapping) else inputs
    if not isinstance(messages, list):
        return None
    turns = [{"role": m["role"], "content": m["content"]} for m in messages
             if isinstance(m, Mapping) and m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)]
    last_user = max((i for i, t in enumerate(turns) if t["role"] == "user"), default=None)
    return turns[:last_user] or None if last_user is not None else None


def _text_at(value: Any, path: str) -> str | None:
    found = at_path(value, path)
    return found if isinstance(found, str) else None


def find_query(inputs: Any, path: str | None = None) -> str | None:
    inputs = decoded(inputs)
    if path:
        return _text_at(inputs, path)
    if isinstance(inputs, str):
        return inputs
    if not isinstance(inputs, Mapping):
        return None
    texts = [v for v in inputs.values() if isinstance(v, str)]
    for key in QUERY_KEYS:
        if isinstance(inputs.get(key), str):
            return inputs[key]
    if len(texts) == 1 and len(inputs) == 1:
        return texts[0]
    return _message(inputs.get("messages"), "user")


def find_answer(outputs: Any, path: str | None = None) -> str | None:
    outputs = decoded(outputs)
    if path:
        return _text_at(outputs, path)
    if isinstance(outputs, str):
        return outputs
    if isinstance(outputs, list):
        return _message(outputs, "assistant")
    if not isinstance(outputs, Mapping):
        return None
    for key in ANSWER_KEYS:
        if isinstance(outputs.get(key), str):
            return outputs[key]
    found = _text_at(outputs, "choices.0.message.content")
    return found if found is not None else _message(outputs.get("messages"), "assistant")


def documents(outputs: Any) -> list[dict[str, Any]]:
    """A retriever's or a memory's outputs as ``{text, id?, score?}`` items: a list of texts or of
    documents (``page_content``/``content``/``text``/``memory`` with ``id`` or an id in ``metadata``),
    or an object holding such a list (``documents``, ``results``, ``memories``)."""
    outputs = decoded(outputs)
    if isinstance(outputs, Mapping):
        for key in ("documents", "results", "memories", "contexts", "chunks"):
            if isinstance(outputs.get(key), list):
                outputs = outputs[key]
                break
        else:
            outputs = [outputs]
    if isinstance(outputs, str):
        outputs = [outputs]
    items = []
    for item in outputs if isinstance(outputs, list) else ():
        if isinstance(item, str):
            items.append({"text": item})
            continue
        if not isinstance(item, Mapping):
            continue
        text = next((item[k] for k in TEXT_KEYS if isinstance(item.get(k), str)), None)
        if text is None:
            continue
        metadata: Mapping[str, Any] = item["metadata"] if isinstance(item.get("metadata"), Mapping) else {}
        cid = next((v for v in [item.get("id"), *(metadata.get(k) for k in ID_KEYS)]
                    if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v)), None)
        entry: dict[str, Any] = {"text": text}
        if cid is not None:
            entry["id"] = str(cid)
        score = item.get("score", metadata.get("score"))
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            entry["score"] = float(score)
        items.append(entry)
    return items


def _error_of(root: Span | None, trace: Trace, answer: str | None, mapping: Any) -> str | None:
    if trace.unreadable:
        return trace.unreadable
    if root is None:
        return "no root span"
    if root.status == "ERROR":
        return f"the trace ended in error: {root.error or 'no message'}"
    if answer is None:
        where = f" at {mapping.answer!r}" if getattr(mapping, "answer", None) else ""
        return f"no answer in the root span's outputs{where}"
    return None


def to_record(trace: Trace, mapping: Any) -> dict[str, Any]:
    """One record of ragmem's data format for ``trace`` (``mapping``: a
    :class:`ragmem.config.trace_settings.TraceMapping`)."""
    spans = sorted(trace.spans, key=lambda s: s.start_ns)
    root = root_of(spans)
    query = find_query(root.inputs, mapping.query) if root else None
    answer = find_answer(root.outputs, mapping.answer) if root and root.status != "ERROR" else None
    record: dict[str, Any] = {"id": trace.trace_id, "trace_id": trace.trace_id}
    # (no query: the inputs' keys are said, never their values: a root's inputs may hold a password)
    record["query"] = query if query and query.strip() else _shown(root.inputs if root else None)
    error = _error_of(root, trace, answer, mapping)
    if query is None or not query.strip():
        error = error or f"no query in the root span's inputs{f' at {mapping.query!r}' if mapping.query else ''}"
    timed, odd = _timed(root, spans, mapping)
    tokens, odd_tokens = _counted(trace, spans)
    error = error or odd or odd_tokens
    if error:
        record["agent_error"] = error
    else:
        record["answer"] = answer
    contexts: list[dict[str, Any]] = []
    for kinds, source in ((mapping.retriever, "rag"), (mapping.memory, mapping.memory_source)):
        for span in spans:
            if span.type in kinds and span is not root:
                contexts.extend({**d, "source": source} for d in documents(span.outputs))
    if contexts:
        record["contexts"] = contexts
    record.update(timed)
    if tokens:
        record["tokens"] = tokens
    for key in ("session_id", "user_id"):
        if getattr(trace, key):
            record[key] = getattr(trace, key)
    history = find_history(root.inputs) if root is not None else None
    if history:
        record["history"] = history
    record["trace_start_ms"] = trace.start_ms
    return record


def holdable(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` (:func:`to_record`'s) as a file can hold it. A trace whose texts hold a lone surrogate
    (half of a UTF-16 pair, an exporter's ``\\u`` escape gone wrong: UTF-8 has none, and the run's data
    file could not be written) is a named failure: its texts kept with each half pair shown escaped
    (``\\ud800``), its answer not judged.

    >>> holdable({"id": "t1", "query": "q \\ud800", "answer": "a"})
    {'id': 't1', 'query': 'q \\\\ud800', 'agent_error': 'a lone surrogate U+D800 in its spans (half of a character pair: not Unicode text)'}
    """
    half = lone_surrogate(json.dumps(record, ensure_ascii=False, default=str))
    if half is None:
        return record
    out = _escaped(record)
    out.pop("answer", None)
    out.setdefault("agent_error", f"a lone surrogate {half} in its spans (half of a character pair: not Unicode text)")
    return out


def _escaped(value: Any) -> Any:
    if isinstance(value, str):
        return escaped_surrogates(value)
    if isinstance(value, dict):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_escaped(v) for v in value]
    return value


def _shown(inputs: Any) -> str:
    """What stands for the query of a trace that has none: the root's input keys, never their values."""
    if isinstance(inputs, dict) and inputs:
        keys = ", ".join(str(k) for k in list(inputs)[:10]) + (", ..." if len(inputs) > 10 else "")
        return f"(no query: the root's inputs hold {keys})"
    return "(no input)" if inputs in (None, "", {}, []) else "(no query in the root's inputs)"


#: the longest a trace's root may last (a week): a longer one is a clock or an exporter gone wrong
MAX_MS = 7 * 24 * 3600 * 1000.0


def _timed(root: Span | None, spans: list[Span], mapping: Any) -> tuple[dict[str, Any], str | None]:
    """The root's latency and the stages' times (``latency_ms``, ``timings_ms``), or why the trace's
    times cannot be used (a span that ends before it starts: a clock step; one longer than a week)."""
    out: dict[str, Any] = {}
    if root is not None and root.end_ns is not None:
        ms = (root.end_ns - root.start_ns) / 1e6
        if not 0 <= ms <= MAX_MS:
            return {}, f"its root span lasts {ms:g} ms (it ends before it starts, or after a week: a clock step?)"
        out["latency_ms"] = ms
    stages: dict[str, float] = {}
    for span in spans:
        stage = mapping.stages.get(span.type)
        if stage and span is not root and span.end_ns is not None:
            ms = (span.end_ns - span.start_ns) / 1e6
            if not 0 <= ms <= MAX_MS:
                return {}, f"its {span.type} span {span.name!r} lasts {ms:g} ms (a clock step?)"
            stages[stage] = stages.get(stage, 0.0) + ms
    if stages:
        out["timings_ms"] = stages
    return out, None


#: the largest token count believed (a trillion): a larger one is an exporter's garbage
MAX_TOKENS = 10**12


def _counted(trace: Trace, spans: list[Span]) -> tuple[dict[str, int] | None, str | None]:
    """The trace's token usage (its own, else its spans' summed), or why it is not a usage."""
    total: dict[str, int] = {}
    for usage in ([trace.tokens] if trace.tokens else [s.tokens for s in spans]):
        for key, value in (usage or {}).items():
            count = value if isinstance(value, int) and not isinstance(value, bool) else None
            if count is None and isinstance(value, float) and value.is_integer():
                count = int(value)
            if count is None or not 0 <= count <= MAX_TOKENS:
                shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
                return None, f"its token usage {key} = {shown} is not a count"
            total[key] = total.get(key, 0) + count
    return total or None, None
