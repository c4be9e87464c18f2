"""An application's MLflow traces as data (``data.traces``), and the judgements written back onto them.

:func:`read` pages through an experiment's traces in a time window (oldest first, ``page_size`` at a
time, so memory stays bounded whatever the window holds), keeps a seeded share of them, and hands
each over as a :class:`ragmem.data.spans.Trace` (the mapping to an example is there). ragmem's own
traces (the agent calls of its runs, tagged ``ragmem.example_id``) are never read as traffic.

:func:`write_back` puts each judged trace's verdict and scores on it as MLflow assessments (source:
the judge's model, or ragmem's code; metadata: the evaluation run's id and the judge's signature
with its prompt version), so the MLflow UI's trace view shows them beside the trace. An assessment
of the same name that ragmem wrote before is updated, never duplicated.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any, Iterator

from ragmem.data.spans import sampled, Span, Trace
from ragmem.errors import ConfigError
from ragmem.runtime import progress
from ragmem.runtime.imports import lean_import
from ragmem.tracking.store import Feedback, prepare_local_store

#: the metadata key that marks an assessment as ragmem's (and names the run that wrote it)
RUN_KEY = "ragmem.run_id"
#: an assessment's judge (its signature: model, prompt version, settings): the same judge updates its own
SIGNATURE_KEY = "ragmem.judge.signature"


def unreadable(exc: BaseException) -> str | None:
    """What a store that failed while read says, in one line, when it is the store's fault (a damaged
    or vanished database), else ``None``."""
    text = f"{type(exc).__name__}: {exc}"
    for said in ("database disk image is malformed", "file is not a database", "no such table", "unable to open",
                 "disk I/O error"):
        if said in text:
            return said
    return None


def window_filter(since: datetime | None, until: datetime | None, extra: str | None) -> str | None:
    """MLflow's search filter for traces started in ``[since, until)``, ANDed with ``extra``."""
    parts = []
    if since is not None:
        parts.append(f"trace.timestamp_ms >= {int(since.timestamp() * 1000)}")
    if until is not None:
        parts.append(f"trace.timestamp_ms < {int(until.timestamp() * 1000)}")
    if extra:
        parts.append(extra)
    return " AND ".join(parts) or None


def _client(uri: str):
    mlflow = lean_import("mlflow")
    prepare_local_store(uri)
    return mlflow.MlflowClient(tracking_uri=uri)


def read(uri: str, experiment: str, *, since: datetime | None = None, until: datetime | None = None,
         filter: str | None = None, limit: int = 100_000, share: float = 1.0, seed: int = 0,
         page_size: int = 500) -> Iterator[Trace]:
    """The traces of ``experiment`` started in ``[since, until)`` (and matching ``filter``), oldest
    first, at most ``limit`` of the ``share`` :func:`ragmem.data.spans.sampled` keeps with ``seed``;
    an experiment that is not in ``uri`` is a ConfigError naming the setting."""
    client = _client(uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise ConfigError(f"data.traces.experiment: no experiment {experiment!r} in {uri}")
    location = found.experiment_id
    query = window_filter(since, until, filter)
    token, kept = None, 0
    while kept < limit:
        try:  # (the page's infos, then their spans: a trace whose spans cannot be read is named, never dropped)
            page = client.search_traces(locations=[location], filter_string=query, max_results=page_size,
                                        order_by=["timestamp_ms ASC"], page_token=token, include_spans=False)
        except Exception as exc:
            if "filter" in str(exc).lower() or "parse" in str(exc).lower() or "invalid" in str(exc).lower():
                raise ConfigError(f"data.traces.filter: MLflow refused {query!r}: {str(exc).splitlines()[0]}") from None
            if unreadable(exc):
                raise ConfigError(f"data.traces: the store {uri} could not be read ({unreadable(exc)}); "
                                  "nothing was judged") from None
            raise
        infos = [found.info for found in page if found.info.tags.get("ragmem.example_id") is None  # (not ragmem's own)
                 and sampled(found.info.trace_id, share, seed)][:limit - kept]
        loaded = _with_spans(uri, infos)
        for info in infos:
            kept += 1
            found = loaded.get(info.trace_id)
            yield as_trace(found) if found is not None else _unreadable(info)
        token = page.token
        if not token:
            break


def listed(uri: str, experiment: str, *, since: datetime | None, until: datetime | None, filter: str | None = None,
           share: float = 1.0, seed: int = 0, page_size: int = 500) -> set[str]:
    """The ids of the traces :func:`read` would give for the same selection, without their spans (a
    listing: what a window's late traces are counted against)."""
    client = _client(uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return set()
    query, token = window_filter(since, until, filter), None
    ids: set[str] = set()
    while True:
        page = client.search_traces(locations=[found.experiment_id], filter_string=query, max_results=page_size,
                                    order_by=["timestamp_ms ASC"], page_token=token, include_spans=False)
        ids.update(t.info.trace_id for t in page if t.info.tags.get("ragmem.example_id") is None
                   and sampled(t.info.trace_id, share, seed))
        token = page.token
        if not token:
            return ids


def _with_spans(uri: str, infos: list[Any]) -> dict[str, Any]:
    """The traces listed (``infos``) with their spans, by id; one whose spans cannot be read (deleted
    since it was listed, not yet written) is missing (MLflow leaves it out with a warning of its own:
    muted). The spans are loaded for the infos the listing gave (MLflow's search does the same inside:
    0.20 s for 300 traces, where asking for them by id read the infos again, 0.95 s); an MLflow
    without that step asks by id."""
    if not infos:
        return {}
    from concurrent.futures import ThreadPoolExecutor

    from mlflow.tracing.client import TracingClient  # (mlflow: imported by _client already)

    client = TracingClient(uri)
    quiet = logging.getLogger("mlflow.tracing.client")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        if hasattr(client, "_group_trace_infos_by_location") and hasattr(client, "_load_traces_by_location"):
            with ThreadPoolExecutor(4, thread_name_prefix="ragmem-traces") as pool:
                found = client._load_traces_by_location(client._group_trace_infos_by_location(infos), pool)
        else:
            found = client.batch_get_traces([info.trace_id for info in infos])
        return {t.info.trace_id: t for t in found}
    finally:
        quiet.setLevel(level)


def _unreadable(info: Any) -> Trace:
    """A listed trace whose spans could not be read: a named failure of its window."""
    state = str(getattr(info, "state", "") or "").rsplit(".", 1)[-1]
    why = ("its root span is not written yet (the trace is still running)" if state == "IN_PROGRESS" else
           "its spans could not be read from the store (deleted since it was listed, its root span missing, or not "
           "written)")
    metadata = info.trace_metadata or {}
    return Trace(info.trace_id, int(info.request_time), [], session_id=metadata.get("mlflow.trace.session") or None,
                 user_id=metadata.get("mlflow.trace.user") or None, unreadable=why)


def _tokens(usage: Any) -> dict[str, int] | None:
    if isinstance(usage, str):
        try:
            usage = json.loads(usage)
        except ValueError:
            return None
    if not isinstance(usage, dict):
        return None
    return {str(k): v for k, v in usage.items()} or None  # (as exported: a count that is none is the trace's failure)


def as_trace(found: Any) -> Trace:
    """An MLflow ``Trace`` as a :class:`ragmem.data.spans.Trace`."""
    info = found.info
    metadata = info.trace_metadata or {}
    spans = []
    for span in found.data.spans:
        status = span.status.status_code
        status = getattr(status, "name", str(status)).replace("SpanStatusCode.", "")
        error = span.status.description or None
        for event in span.events or ():
            if event.name == "exception":
                attributes = event.attributes or {}
                error = ": ".join(str(attributes[k]) for k in ("exception.type", "exception.message") if attributes.get(k))
        spans.append(Span(span.span_id, span.parent_id, span.name, span.span_type or "UNKNOWN", span.start_time_ns,
                          span.end_time_ns, status, error, span.inputs, span.outputs,
                          _tokens((span.attributes or {}).get("mlflow.chat.tokenUsage"))))
    return Trace(info.trace_id, int(info.request_time), spans,
                 session_id=metadata.get("mlflow.trace.session") or None,
                 user_id=metadata.get("mlflow.trace.user") or None,
                 tokens=_tokens(getattr(info, "token_usage", None) or metadata.get("mlflow.trace.tokenUsage")))


def write_back(uri: str, feedback: dict[str, list[Feedback]], run_id: str, metadata: dict[str, str]) -> dict[str, int]:
    """Each trace id's ``feedback`` as assessments on it, each with its origin in its metadata (the run
    id, the judge's signature, the prompt and ragmem versions: ``metadata``): ragmem's earlier assessment
    of the same name *by the same judge* (signature) updated, a new one logged otherwise, so a second
    judge's verdict stands beside the first one's. Returns the counts ``{"added", "updated", "gone"}``
    (gone: traces deleted since they were read, each left out)."""
    lean_import("mlflow")  # (mlflow's entities and tracing client: with mlflow, imported on demand)
    from mlflow.entities import AssessmentSource
    from mlflow.entities import Feedback as MlflowFeedback
    from mlflow.tracing.client import TracingClient

    client = TracingClient(uri)
    counts = {"added": 0, "updated": 0, "gone": 0}
    todo = {trace_id: items for trace_id, items in feedback.items() if items}
    # (a call per assessment: 20 ms a trace on a SQLite file, 85 ms through a tracking server here; a
    # nightly window's thousands of traces take minutes, counted in this stage's lines)
    mine = metadata.get(SIGNATURE_KEY)
    with progress.stage("writing assessments back", len(todo), unit="traces") as stage:
        for trace_id, items in todo.items():
            try:
                info = client.get_trace_info(trace_id)
            except Exception as exc:  # deleted since it was read (a retention job): its assessments have no trace
                if "not found" not in str(exc).lower() and "does not exist" not in str(exc).lower():
                    raise
                counts["gone"] += 1
                stage.advance()
                continue
            held = {(a.name, (a.metadata or {}).get(SIGNATURE_KEY)): a.assessment_id
                    for a in info.assessments or () if (a.metadata or {}).get(RUN_KEY) is not None}
            for item in items:
                assessment = MlflowFeedback(name=item.name, value=item.value, rationale=item.rationale,
                                            source=AssessmentSource(source_type=item.source_type,
                                                                    source_id=item.source_id),
                                            metadata={**metadata, RUN_KEY: run_id})
                if (item.name, mine) in held:
                    client.update_assessment(trace_id, str(held[(item.name, mine)]), assessment)
                    counts["updated"] += 1
                else:
                    client.log_assessment(trace_id, assessment)
                    counts["added"] += 1
            stage.advance()
    return counts
