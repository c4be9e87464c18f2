"""``gates.<metric>.drift`` of windows of traffic: each window's units (sessions, or traces) kept on
its MLflow run, and the monitor of :mod:`ragmem.stats.drift` run over every window of the
deployment so far, this one last.

A window's run carries the tag ``ragmem.traces.drift`` (``{metric: [units, mean, m2]}``, written
with the run's other tags); the monitor reads it from the FINISHED runs of the same window key
(:func:`ragmem.run.windows.key`), oldest first. A run whose tag cannot be read (edited by hand, cut
short) is left out and counted, never the reason a window fails. ``drift.since`` leaves out the
windows that started before it.

Besides the monitor, the volume a window has: a ``max_regression`` gate compared one window with
the last can detect a drop of about ``min_detectable`` only; when that is more than its own
``max_regression``, every window says so (:func:`undetectable_lines`) and ``ragmem serve`` says it
when the deployment is served (:func:`served_notes`, from the last window's tag
``ragmem.traces.volume``). The tags a window's run gets are in its summary's ``traces.tags``
(:func:`summarize`), which the tracking layer writes with the run's other tags.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ragmem.config.loading import RunConfig
from ragmem.config.trace_settings import parse_time
from ragmem.metrics import catalogue
from ragmem.run import windows
from ragmem.stats import clusters
from ragmem.stats.drift import Verdict, Window, detect, window_of
from ragmem.stats.multiplicity import min_detectable
from ragmem.tracking.files import ParquetTable

log = logging.getLogger("ragmem")

#: the tags of a window's run: its units per drift-watched metric; its volume and what it could detect
TAG, VOLUME = "ragmem.traces.drift", "ragmem.traces.volume"
#: the most windows the monitor reads back (a nightly schedule's three years)
MOST_WINDOWS = 1100


def watched(cfg: RunConfig) -> dict[str, Any]:
    """``{metric: its drift settings}`` of the gates that watch a drift."""
    return {m: g.drift for m, g in cfg.gates.items() if g.drift is not None}


def _column(metric: str) -> str:
    facts = catalogue.facts(metric)
    return facts.column if facts is not None and facts.column else metric  # (a metric of one's own: its name)


def _values(table: Any, column: str) -> list[Any] | None:
    """A per-example column of the run's table (a frame, or a streamed run's Parquet file:
    :class:`ragmem.tracking.files.ParquetTable`), ``None`` when the table has none."""
    if column not in table:
        return None
    return table.values(column) if isinstance(table, ParquetTable) else table[column].tolist()


def _units(table: Any) -> list[Any] | None:
    """Each example's unit: its session (``stats.cluster_by``, which a window of traces in sessions
    sets by itself), else none (each trace its own)."""
    return _values(table, clusters.COLUMN)


def this_window(cfg: RunConfig, table: Any) -> dict[str, Window | None]:
    """This window of each watched metric (``None``: no example scored it)."""
    units = _units(table)
    out: dict[str, Window | None] = {}
    for metric in watched(cfg):
        values = _values(table, _column(metric))
        out[metric] = window_of(values, units) if values is not None else None
    return out


def _history(cfg: RunConfig, run_id: str | None) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """The earlier FINISHED windows of this key, oldest first: ``(since, {metric: [units, mean, m2]})``;
    and how many carried a tag that could not be read."""
    found, unreadable = [], 0
    for run in reversed(windows.finished(cfg, MOST_WINDOWS)):
        if run.info.run_id == run_id or TAG not in run.data.tags:
            continue
        try:
            kept = json.loads(run.data.tags[TAG])
            if not isinstance(kept, dict):
                raise ValueError("not an object")
        except ValueError:
            unreadable += 1
            continue
        found.append((run.data.tags.get(windows.SINCE, ""), kept))
    return found, unreadable


def _counts(since: str, limit: Any) -> bool:
    if limit is None:
        return True
    try:
        return bool(since) and parse_time(since) >= limit
    except ValueError:
        return False


def assess(cfg: RunConfig, table: Any, run_id: str | None) -> dict[str, Any]:
    """``{metric: {window, windows, evidence, threshold, alarmed, drop, over, max_drop, left_out}}``:
    the monitor after this window, for the summary's ``traces.drift``."""
    drifts = watched(cfg)
    if not drifts:
        return {}
    now, (history, unreadable) = this_window(cfg, table), _history(cfg, run_id)
    out = {}
    for metric, settings in drifts.items():
        limit = parse_time(settings.since) if settings.since else None
        series, bad = [], unreadable
        for since, kept in history:
            if metric not in kept or not _counts(since, limit):
                continue
            try:
                series.append(Window.of_list(kept[metric]))
            except (TypeError, ValueError):
                bad += 1
        current = now[metric]
        if current is not None and _counts(cfg.data.traces.since or "", limit):
            series.append(current)
        verdict = detect(series, settings.max_drop, settings.alpha, settings.baseline_windows,
                         catalogue.lower_is_better(metric, cfg.metrics.directions))
        rise = catalogue.lower_is_better(metric, cfg.metrics.directions)
        out[metric] = {"window": None if current is None else current.as_list(), "max_drop": settings.max_drop,
                       "way": "rise" if rise else "drop", "baseline_windows": settings.baseline_windows,
                       "left_out": bad, **_as_dict(verdict)}
    return out


def _as_dict(v: Verdict) -> dict[str, Any]:
    return {"windows": v.windows, "evidence": v.evidence, "threshold": v.threshold, "alarmed": v.alarmed,
            "drop": v.drop, "over": v.over, "sigma": v.sigma}


def summarize(cfg: RunConfig, summary: dict[str, Any], table: Any, run_id: str | None) -> None:
    """A window's summary gets, in ``traces``: ``drift`` (the monitor after it, per watched metric),
    ``volume`` (its units, and what a ``max_regression`` gate's comparison with the last window could
    detect) and ``tags`` (what its run is tagged with for the windows after it)."""
    traces = summary.get("traces")
    if not traces or not cfg.data.traces.experiment:
        return
    drift = assess(cfg, table, run_id)
    units = _units(table)
    rows = {r["metric"]: r for r in (traces.get("previous") or {}).get("rows", [])}
    detectable = {}
    for metric, gate in cfg.gates.items():
        row = rows.get(metric, {})
        if gate.max_regression is not None and row.get("ci_low") is not None and row.get("p_value") is not None:
            detectable[metric] = min_detectable(row["ci_low"], row["ci_high"], cfg.stats.confidence)
    volume = {"units": len(set(units)) if units is not None else len(table),
              "unit": "sessions" if units is not None else "traces", "min_detectable": detectable}
    kept = {m: d["window"] for m, d in drift.items() if d["window"] is not None}
    traces.update({"drift": drift, "volume": volume,
                   "tags": {**({TAG: json.dumps(kept)} if kept else {}), VOLUME: json.dumps(volume)}})


def undetectable_lines(cfg: RunConfig, volume: dict[str, Any]) -> list[str]:
    """``pass_rate: max_regression 0.05 is below what 10 sessions can detect (0.355): see drift`` for
    each gate whose threshold its window's volume cannot see."""
    out = []
    for metric, seen in (volume.get("min_detectable") or {}).items():
        gate = cfg.gates.get(metric)
        if gate is None or gate.max_regression is None or not isinstance(seen, (int, float)) or seen <= gate.max_regression:
            continue
        where = "the drift gate watches across windows" if gate.drift is not None else f"see gates.{metric}.drift"
        out.append(f"{metric}: max_regression {gate.max_regression:g} is below what {volume.get('units')} "
                   f"{volume.get('unit', 'traces')} can detect ({seen:.3f}): {where}")
    return out


def served_notes(cfg: RunConfig) -> list[str]:
    """At ``ragmem serve``: what the last window's volume could detect, against each threshold."""
    if not (cfg.data.traces.experiment and any(g.max_regression is not None for g in cfg.gates.values())):
        return []
    last = windows.finished(cfg, 1)
    try:
        seen = json.loads(last[0].data.tags.get(VOLUME, "{}")) if last else {}
    except ValueError:
        return []
    return undetectable_lines(cfg, seen) if isinstance(seen, dict) else []
