"""Windows of production traffic (``data.traces.incremental``, what ``ragmem serve`` runs on a
schedule): each run evaluates the traces that arrived since the last window of its config ended.

The watermark is kept in the MLflow experiment, not in a process: every window's run carries the
tags ``ragmem.traces.window`` (a key of the traces' source: experiment, store, filter, sample),
``ragmem.traces.since`` and ``ragmem.traces.until``. A new window starts where the last one of the
same key ended:

- the last one FINISHED: from its ``until`` to now (windows are contiguous and disjoint: no trace
  is judged twice);
- it stopped (FAILED, KILLED, or RUNNING with its process gone) and its journal is in this home:
  it is resumed, the same window, nothing paid twice; without its journal, its window again (the
  judge cache serves what was paid);
- still running: refused;
- none: from ``data.traces.since`` (the first window).

Every run of an experiment's traces (incremental or not, ``ragmem run`` too) carries the key and
is compared with the previous FINISHED one by an *unpaired* test (different traces:
two samples, not pairs; :func:`ragmem.stats.paired_runs.unpaired_rows`), in the summary's
``traces.previous``; a ``max_regression`` gate of a windowed run is checked against it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ragmem.config.loading import RunConfig
from ragmem.config.secrets import scrub
from ragmem.errors import RagmemError
from ragmem.metrics import catalogue
from ragmem.metrics.names import REFERENCE
from ragmem.run.journal import Journal
from ragmem.runtime.processes import run_is_dead
from ragmem.stats.paired_runs import ids_of, paired_rows, unpaired_rows
from ragmem.tracking.runs import run_table, scoring_of
from ragmem.tracking.store import Tracker

KEY, SINCE, UNTIL = "ragmem.traces.window", "ragmem.traces.since", "ragmem.traces.until"


def key(cfg: RunConfig) -> str:
    """What identifies a deployment's stream of windows: the traces' source and selection."""
    t = cfg.data.traces
    source = {"experiment": t.experiment, "uri": scrub(t.tracking_uri or cfg.tracking_uri), "filter": t.filter,
              "sample": t.sample, "seed": t.seed, "evaluated_in": cfg.experiment}
    return hashlib.sha256(json.dumps(source, sort_keys=True).encode()).hexdigest()[:16]


def tags(cfg: RunConfig) -> dict[str, str]:
    """The tags of a traces run: its window, and (traces of an experiment) the key the next window
    looks for."""
    t = cfg.data.traces
    if not t.given:
        return {}
    out = {SINCE: t.since or "", UNTIL: t.until or ""}
    if t.experiment:
        out[KEY] = key(cfg)
    return out


def _runs(cfg: RunConfig, finished: bool = False, max_results: int = 1) -> list:
    if not cfg.tracking.enabled:
        return []
    tracker = Tracker(cfg.tracking_uri, cfg.tracking.artifact_root)
    found = tracker.client.get_experiment_by_name(cfg.experiment)
    if found is None:
        return []
    query = f"tags.`{KEY}` = '{key(cfg)}'" + (" AND attributes.status = 'FINISHED'" if finished else "")
    return list(tracker.client.search_runs([found.experiment_id], filter_string=query,
                                           order_by=["attributes.start_time DESC"], max_results=max_results))


def plan(cfg: RunConfig) -> tuple[str | None, str | None]:
    """Where the next window starts (an ISO time; ``None``: ``data.traces.since``) and the run to
    resume instead (``None``: a new window)."""
    runs = _runs(cfg)
    if not runs:
        return None, None
    last = runs[0]
    run_id, status, run_tags = last.info.run_id, last.info.status, last.data.tags
    if status == "FINISHED":
        return run_tags.get(UNTIL) or None, None
    if status == "RUNNING" and run_is_dead(run_tags) is False:
        raise RagmemError(f"data.traces.incremental: the previous window's run {run_id} is still running "
                          f"(pid {run_tags.get('ragmem.pid')}); a window starts when it has ended")
    if Journal.has_meta(run_id):
        return None, run_id
    return run_tags.get(SINCE) or None, None


def finished(cfg: RunConfig, most: int) -> list:
    """The last ``most`` FINISHED windows of this key, newest first."""
    return _runs(cfg, finished=True, max_results=most)


def previous(cfg: RunConfig, run_id: str | None) -> str | None:
    """The last FINISHED window of this key before the run ``run_id``."""
    for run in _runs(cfg, finished=True, max_results=2):
        if run.info.run_id != run_id:
            return run.info.run_id
    return None


def compared(cfg: RunConfig) -> list[str]:
    """What a window is compared on: the watched metrics the run has (:func:`ragmem.metrics.catalogue.watched`),
    those that need no reference (traffic has none), and every metric gated on a regression."""
    names = catalogue.watched(cfg.metrics.names, cfg.metrics.directions, (REFERENCE,))
    return names + [m for m, g in cfg.gates.items() if g.max_regression is not None and m not in names]


def compare(cfg: RunConfig, table: Any, run_id: str | None) -> dict[str, Any] | None:
    """This window against the previous one, unpaired: ``{run_id, rows}`` (rows of
    :func:`ragmem.stats.paired_runs.unpaired_rows`), or ``None`` when there is no previous window."""
    before = previous(cfg, run_id) if cfg.data.traces.experiment else None
    if before is None:
        return None
    tracker = Tracker(cfg.tracking_uri, cfg.tracking.artifact_root)
    base = run_table(tracker.client, before)
    zero_division, scorer = scoring_of(base.attrs["run"].data.params)
    names = compared(cfg)
    shared = set(ids_of(base)) & set(ids_of(table))
    if shared:  # the same traces again (a rerun, an overlapping window): pairs, never two independent samples
        rows, n = paired_rows(base, table, names, zero_division, scorer, cfg.stats.resamples or 1000, cfg.seed,
                              cfg.stats.confidence, cfg.stats.bootstrap)
        return {"run_id": before, "test": f"paired bootstrap (the {n} traces both runs evaluated)", "rows": rows,
                "paired": n}
    rows = unpaired_rows(base, table, names, zero_division, scorer, cfg.stats.resamples or 1000, cfg.seed,
                         cfg.stats.confidence)
    return {"run_id": before, "test": "unpaired bootstrap (two windows: different traces)", "rows": rows}



def line(row: dict[str, Any]) -> str:
    """``pass_rate 0.7000 -> 0.6200: -0.0800 [-0.1591, +0.0060] p=0.064 (unpaired, 300 and 250 traces)``."""
    if row.get("diff") is None:
        return f"{row['metric']}: not compared (null in either window)"
    how = f"unpaired, {row['n_a']} and {row['n_b']} traces" if "n_a" in row else f"paired, {row.get('n_shared')} traces"
    p = "" if row.get("p_value") is None else f" p={row['p_value']:.3g}"
    return (f"{row['metric']} {row['a']:.4f} -> {row['b']:.4f}: {row['diff']:+.4f} [{row['ci_low']:+.4f}, "
            f"{row['ci_high']:+.4f}]{p} ({how})")


def summarize(cfg: RunConfig, summary: dict[str, Any], table: Any, run_id: str | None) -> None:
    """A traces run's summary gets ``traces``: its window, the traces it evaluated and how many
    failed, and (incremental) the comparison with the previous window."""
    t = cfg.data.traces
    if not t.given:
        return
    counts = summary.get("counts", {})
    summary["traces"] = {
        "source": f"experiment {t.experiment}" if t.experiment else ", ".join(t.files),
        "window": {"since": t.since, "until": t.until}, "incremental": t.incremental,
        "evaluated": counts.get("n_examples", 0), "failed": counts.get("n_agent_errors", 0),
        "previous": compare(cfg, table, run_id)}
