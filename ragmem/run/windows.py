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

One window at a time, by construction: before it reads the watermark a run claims its key in the
tracking store (:mod:`ragmem.tracking.claims`: an atomic create, so of two runs started at the same
instant, by two schedules or a retry overlapping a slow run, exactly one holds it), and releases it
once its run has ended. A second run is refused at once with one line naming the holder (exit 2);
a claim whose process is gone (same host) is taken over. A scheduled window (``ragmem serve``) waits
for the holder instead, up to ``SCHEDULED_WAIT_S`` (an hour), saying so every 10 s.

Every run of an experiment's traces (incremental or not, ``ragmem run`` too) carries the key and
is compared with the previous FINISHED one by an *unpaired* test (different traces:
two samples, not pairs; :func:`ragmem.stats.paired_runs.unpaired_rows`), in the summary's
``traces.previous``; a ``max_regression`` gate of a windowed run is checked against it.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import threading
import time
from datetime import datetime
from typing import Any, Callable, Iterator

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
log = logging.getLogger("ragmem")
_HELD: dict[str, Any] = {}  # window key -> the Claim this process holds
_LOCK = threading.Lock()


class WindowHeld(RagmemError):
    """Another run holds this config's stream of windows (exit 2: nothing was paid)."""


SCHEDULED_WAIT_S = 3600.0  # how long a scheduled window waits for the run holding its config's windows
WAIT_POLL_S = 2.0


def claim(cfg: RunConfig, wait_s: float = 0.0) -> None:
    """Hold this config's stream of windows (``data.traces.incremental``, tracked) until
    :func:`release`; when another run holds it, wait for it up to ``wait_s`` (a scheduled window,
    saying so every 10 s), then refuse with one line naming the holder."""
    if not (cfg.tracking.enabled and cfg.data.traces.incremental and cfg.data.traces.experiment):
        return
    name = key(cfg)
    deadline, said = time.monotonic() + wait_s, 0.0
    while True:
        with _LOCK:
            if name in _HELD:  # (this process already holds it: a run inside a run never happens)
                return
            held = Tracker(cfg.tracking_uri, cfg.tracking.artifact_root).claim(name)
            holder = held.take()
            if holder is None:
                _HELD[name] = held
                return
        if time.monotonic() >= deadline:
            waited = f" (waited {wait_s:g} s)" if wait_s else ""
            raise WindowHeld(f"data.traces.incremental: the windows of this config are held by {holder.said()}"
                             f"{waited}; a window starts when that run has ended")
        if time.monotonic() - said >= 10:
            log.info("data.traces.incremental: the windows of this config are held by %s: waiting for it to end "
                     "(up to %g s more)", holder.said(), max(0.0, deadline - time.monotonic()))
            said = time.monotonic()
        time.sleep(WAIT_POLL_S)


def holds(cfg: RunConfig, run_id: str | None) -> None:
    """Name the run that holds this process's claim (what a refused run prints)."""
    held = _HELD.get(key(cfg)) if cfg.data.traces.given and cfg.data.traces.experiment else None
    if held is not None and run_id:
        with contextlib.suppress(Exception):  # (a name on the claim is a courtesy, never a failure)
            held.note_run(run_id)


def release(cfg: RunConfig) -> None:
    """Give the claim back (the run ended, whatever its state); a claim not held: nothing."""
    if not (cfg.data.traces.given and cfg.data.traces.experiment):
        return
    with _LOCK:
        held = _HELD.pop(key(cfg), None)
    if held is not None:
        try:
            held.release()
        except Exception as exc:  # the next run takes it over once this process is gone
            log.warning("data.traces: the windows' claim was not released (%s): the next window takes it over "
                        "once this process has ended", exc)


@contextlib.contextmanager
def claimed(cfg: RunConfig, wait_s: float = 0.0) -> Iterator[None]:
    """:func:`claim` (waiting up to ``wait_s``), given back should what follows raise (a window that
    holds no traces, a bad store, a preparation that fails); else held until :func:`released` gives
    it back after the run."""
    claim(cfg, wait_s)
    try:
        yield
    except BaseException:
        release(cfg)
        raise


@contextlib.contextmanager
def released(cfg: RunConfig) -> Iterator[None]:
    """What follows holds the claim; :func:`release` after it, however it ends."""
    try:
        yield
    finally:
        release(cfg)


@atexit.register
def _release_all() -> None:
    """A process that ends holding a claim gives it back (a killed one is taken over)."""
    for held in list(_HELD.values()):
        with contextlib.suppress(Exception):
            held.release()
    _HELD.clear()


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
        return _watermark(run_id, run_tags.get(UNTIL) or None), None
    if status == "RUNNING" and run_is_dead(run_tags) is False:
        raise RagmemError(f"data.traces.incremental: the previous window's run {run_id} is still running "
                          f"(pid {run_tags.get('ragmem.pid')}); a window starts when it has ended")
    if Journal.has_meta(run_id):
        return None, run_id
    return _watermark(run_id, run_tags.get(SINCE) or None, SINCE), None


def _watermark(run_id: str, value: str | None, tag: str = UNTIL) -> str | None:
    """A window's end (or start) as its run's tag holds it: an ISO time, or one line naming the tag
    and the run (a tag edited by hand, or written by another tool)."""
    if value is not None:
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise RagmemError(f"data.traces.incremental: the tag {tag} of run {run_id} is not a time: {value[:80]!r} "
                              f"(the watermark of this config's windows: set it to an ISO time, or delete the run)"
                              ) from None
    return value


def late(cfg: RunConfig, listed: Callable[[datetime | None, datetime | None], set[str]]) -> str | None:
    """The note on the previous window's late traces: those started within it (``listed``: the ids in
    a range now) that it did not read, because they were written after it ended (a trace still
    running then, an exporter's delay); ``None`` when there are none or it cannot be told (no
    previous window, or one that stopped at ``data.traces.max``). They are judged by no window."""
    runs = finished(cfg, 1)
    if not runs:
        return None
    run, t = runs[0], cfg.data.traces
    since, until = (run.data.tags.get(tag) or None for tag in (SINCE, UNTIL))
    if until is None:
        return None
    try:
        read = set(ids_of(run_table(Tracker(cfg.tracking_uri, cfg.tracking.artifact_root).client, run.info.run_id)))
    except RagmemError:  # (its table not logged or gone: nothing to count against, and no reason to stop)
        return None
    if len(read) >= t.max:
        return None
    missed = listed(datetime.fromisoformat(since) if since else None, datetime.fromisoformat(until)) - read
    if not missed:
        return None
    return (f"{len(missed)} traces started in the previous window (run {run.info.run_id}, until {until}) were written "
            f"after it was read: no window judges them (data.traces.lag, now {t.lag}, holds a window's end back "
            f"longer)")


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
