"""Production traffic as a run's data: ``data.traces`` read from its source (an MLflow experiment, OTLP
JSON files: :mod:`ragmem.sources`, one module a source), each trace mapped to a
record (:mod:`ragmem.data.spans`), the records written as they come to a JSON Lines file in the home
named by its content (``<home>/traces/traces-<sha256[:16]>.jsonl``). From there on they are a data
file like any other, answers replayed from it (the agent is not called: the trace is the answer).

The window is fixed when the run is prepared: ``until`` (default: now) and ``since`` as times, put in
the run's config as ISO times, so its params say which traces it read and a ``--resume`` reads the
same ones (a duration such as ``24h`` is taken from the interrupted run, not from the clock).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Iterator

from ragmem.config.loading import RunConfig
from ragmem.config.secrets import mask_traffic
from ragmem.config.settings import DataFileSpec
from ragmem.config.trace_settings import parse_time, TracesSettings
from ragmem.data import given, spans
from ragmem.data.conversations import Sessions
from ragmem.errors import DataError
from ragmem.run import windows
from ragmem.run.journal import Journal
from ragmem.runtime import progress
from ragmem.sources import source_for
from ragmem.stats.clusters import MIN_CLUSTERS
from ragmem.tracking.uri import accepts_writes

log = logging.getLogger("ragmem")

FOLDER = "traces"
#: the traces held at once when ``data.chunk_size`` is not set: a trace is a heavy example (its contexts,
#: its conversation's earlier turns, token columns). Measured (benchmarks/bench_traces.py): at 1,000 a
#: 20,000-trace window took 1.14x and 1.18x the memory of a 2,000-trace one, and less time per trace;
#: at 2,000, 1.32x
CHUNK = 1_000


class NoTraces(DataError):
    """The window holds no traces: ``ragmem run`` refuses it (exit 2); a scheduled window has
    nothing to do, and its flow run completes (the next window starts where the last one ended)."""


def window(settings: TracesSettings, resume: str | None = None, now: datetime | None = None,
           watermark: str | None = None, timed: bool = True) -> tuple[datetime | None, datetime | None]:
    """``[since, until)`` as times: those of the run ``resume`` continues when it has them, else
    from the settings (``until`` null: ``now``, for a source whose traces arrive over time, ``timed``; an
    incremental window: ``lag`` before it, so a trace still being written falls in the next window;
    files: no window unless set);
    ``watermark``: where the last window ended (``data.traces.incremental``), instead of ``since``."""
    if resume:
        started = (Journal.read_meta_for(resume) or {}).get("config", {})
        since, until = started.get("data.traces.since"), started.get("data.traces.until")
        if until:
            return (parse_time(since) if since else None), parse_time(until)
    now = now or datetime.now(timezone.utc)
    ended = now if not settings.incremental else parse_time(settings.lag, now)  # (a window of a schedule: its lag)
    until = parse_time(settings.until, now) if settings.until else ended if timed else None
    since = parse_time(watermark) if watermark else parse_time(settings.since, now) if settings.since else None
    return since, until


def as_data(cfg: RunConfig, resume: str | None = None) -> tuple[RunConfig, str | None]:
    """``cfg`` with its traces read into a data file (``data.files``) and its window as ISO times,
    and the run to resume (``data.traces.incremental``: the last window, when it stopped; else
    ``resume`` as given); a config without ``data.traces`` as it is. (An incremental window is claimed
    by its caller before this reads the watermark: :func:`ragmem.run.prepare.for_run`.)"""
    settings = cfg.data.traces
    if not settings.given:
        return cfg, resume
    watermark = None
    if settings.incremental and not resume:  # where the last window ended, or the one to finish
        watermark, resume = windows.plan(cfg)
        if resume:
            log.info("data.traces: the last window (run %s) stopped before it ended: resuming it", resume)
    source = source_for(cfg)
    since, until = window(settings, resume, watermark=watermark, timed=source.timed)
    missed = windows.late(cfg, source.ids) if watermark and hasattr(source, "ids") else None
    if missed:
        log.warning("data.traces: %s", missed)
    where = source.where
    if since is not None and until is not None and since >= until:
        raise DataError(where, f"the window [{since.isoformat()}, {until.isoformat()}) is empty: "
                               f"data.traces.since is not before until")
    counts = {"traces": 0, "failed": 0}
    sessions: set[str] = set()
    conversations = Sessions(settings.history)  # each turn's history: what the conversation metrics read

    def lines(stage) -> Iterator[str]:
        source.check()  # (a store that does not answer: one line)
        for trace in source.read(since, until):
            record = conversations.history(mask_traffic(spans.holdable(spans.to_record(trace, settings.mapping))))
            counts["traces"] += 1
            counts["failed"] += "agent_error" in record
            if "session_id" in record:
                sessions.add(record["session_id"])
            stage.advance(1, failed="agent_error" in record)
            yield json.dumps(record, ensure_ascii=False, default=str)

    with progress.stage(f"reading traces of {where}", unit="traces") as stage:
        path = given.write_lines(lines(stage), FOLDER, "traces")
    if path is None:
        shown = f"[{since.isoformat() if since else '-'}, {until.isoformat() if until else '-'})"
        raise NoTraces(where, f"holds no traces in the window {shown}"
                              + (f" matching {settings.filter!r}" if settings.filter else ""))
    log.info("data.traces: %d traces of %s read (%d failed: no answer to judge)", counts["traces"], where,
             counts["failed"])
    if conversations.with_history:
        log.info("data.traces: %d traces are turns of a conversation with earlier turns (data.traces.history: %d)%s",
                 conversations.with_history, settings.history,
                 f"; {conversations.closed_early} sessions were closed to hold at most {conversations.open_sessions:,} "
                 f"open (a later turn of one starts without its earlier turns)" if conversations.closed_early else "")
    window_update: dict = {"since": since.isoformat() if since else None, "until": until.isoformat() if until else None}
    store, unwritten = write_back(cfg), None
    if store and not accepts_writes(store):  # known before judging: the run goes on without it
        window_update["write_back"] = False
        unwritten = f"assessments not written: the store {store} is read-only"
        log.warning("data.traces.write_back: %s", unwritten)
    traces = settings.model_copy(update=window_update)
    data = cfg.data.model_copy(update={"traces": traces, "files": [DataFileSpec(path=str(path), format="jsonl")]})
    if "chunk_size" not in cfg.data.model_fields_set:
        data.chunk_size = min(data.chunk_size, CHUNK)
    update: dict = {"data": data}
    chosen = "; ".join(filter(None, [cfg._chosen, unwritten, missed]))
    if sessions and cfg.stats.cluster_by is None and len(sessions) < counts["traces"]:
        # the turns of a session are not independent: the session is the unit the intervals resample
        update["stats"] = cfg.stats.model_copy(update={"cluster_by": "session_id"})
        said = "the intervals resample sessions (stats.cluster_by: session_id)" if len(sessions) >= MIN_CLUSTERS else (
            f"stats.cluster_by: session_id, but fewer than {MIN_CLUSTERS} sessions are too few to resample: the "
            "intervals resample traces, and run narrow if a session's turns fail together")  # (as the intervals say)
        chosen = "; ".join(filter(None, [chosen, f"the {counts['traces']} traces came in {len(sessions)} sessions: {said}"]))
    adjusted = cfg.model_copy(update=update)
    adjusted._chosen = chosen
    return adjusted, resume


def write_back(cfg: RunConfig) -> str | None:
    """The tracking URI the judgements are written back to (``data.traces.write_back``), or None."""
    settings = cfg.data.traces
    if not (settings.experiment and settings.write_back and cfg.tracking.enabled):
        return None
    return settings.tracking_uri or cfg.tracking_uri
