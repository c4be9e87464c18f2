"""Latency statistics in seconds over the calls that were timed.

For the whole call: ``avg_latency`` (mean), ``latency_p50``, ``latency_p95``, ``latency_p99``
(numpy's linear-interpolation percentiles) and ``latency_max``; for each stage the agent reported
(``embed``, ``retrieve``, ``rerank``, ``llm``, ...): ``{stage}_latency_avg``, ``{stage}_latency_p50``,
``{stage}_latency_p95``, ``{stage}_latency_p99``, ``{stage}_latency_max``.

Failed calls that were timed count (a timeout is latency the user waited through). Latency that was
not measured (a replayed dataset without ``latency_ms``) is missing, never 0: when no call was timed
the metrics are ``None`` ("not measured") and ``n_latency_measured`` is 0.

>>> from ragmem.metrics.latency import latency_stats
>>> latency_stats([1.0, 2.0, 3.0, None])["latency_p50"]
2.0
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np
import pandas as pd

from ragmem.metrics import names
from ragmem.metrics.base import (Family, MetricResult, apply_aggregator, weighted_max, weighted_mean,
                                 weighted_percentile)
from ragmem.schema import STAGES

NAMES = names.LATENCY.selectable
_SUFFIXES = names.LATENCY_SUFFIXES
_STAGE_NAME = names.STAGE_LATENCY


_QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}


def _percentile(q):
    def vfn(v):  # nanpercentile is ~50x slower: use it only when something is missing
        return np.percentile(v, q, axis=1) if not np.isnan(v).any() else np.nanpercentile(v, q, axis=1)
    return vfn


#: each statistic on one sample, on many (rows of a matrix, NaN = not measured) at once, and on
#: weighted resamples (the Poisson bootstrap)
STATISTICS: dict[str, tuple[Any, Any, Any]] = {
    "avg": (np.mean, lambda v: np.nanmean(v, axis=1), weighted_mean),
    "p50": (lambda v: np.percentile(v, 50), _percentile(50), weighted_percentile(50)),
    "p95": (lambda v: np.percentile(v, 95), _percentile(95), weighted_percentile(95)),
    "p99": (lambda v: np.percentile(v, 99), _percentile(99), weighted_percentile(99)),
    "max": (np.max, lambda v: np.nanmax(v, axis=1), weighted_max),
}


def latency_stats(seconds: Iterable[float | None], prefix: str = "") -> dict[str, float | None]:
    """The five statistics of the measured values; ``None`` each when nothing was measured.

    With a ``prefix`` (a stage name) the names are ``{prefix}_latency_{avg,p50,p95,p99,max}``.
    """
    kept = np.array([s for s in seconds if s is not None and not math.isnan(s)], dtype=float)
    names = {n: (f"{prefix}_latency_{_SUFFIXES[n]}" if prefix else n) for n in NAMES}
    if kept.size == 0:
        return {names[n]: None for n in NAMES}
    p50, p95, p99 = np.percentile(kept, [50, 95, 99])
    values = {"avg_latency": kept.mean(), "latency_p50": p50, "latency_p95": p95,
              "latency_p99": p99, "latency_max": kept.max()}
    return {names[n]: float(values[n]) for n in NAMES}


def _column_of(name: str) -> tuple[str, str] | None:
    """The table column and statistic of a latency metric: ``latency_p95`` -> (latency_s, p95),
    ``retrieve_latency_p50`` -> (stage_retrieve_s, p50)."""
    if name in _SUFFIXES:
        return "latency_s", _SUFFIXES[name]
    match = _STAGE_NAME.match(name)
    return (f"stage_{match.group(1)}_s", match.group(2)) if match else None


def compute(table: pd.DataFrame, ctx, wanted) -> MetricResult:
    """The wanted whole-call statistics, and the same statistics of every reported stage."""
    measured = table["latency_s"].dropna()
    values: dict[str, float | None] = {n: v for n, v in latency_stats(measured).items() if n in wanted}
    values["n_latency_measured"] = float(len(measured))
    suffixes = {_SUFFIXES[n] for n in wanted}
    stage_columns = [c for c in table.columns if c.startswith("stage_") and c.endswith("_s")]
    ordered = sorted(stage_columns, key=lambda c: (STAGES.index(c[6:-2]) if c[6:-2] in STAGES else 99, c))
    for column in ordered:
        stage = latency_stats(table[column].dropna(), prefix=column[6:-2])
        values.update({n: v for n, v in stage.items() if n.rsplit("_", 1)[-1] in suffixes})
    notes = [] if len(measured) else ["latency not measured (replayed data without latency_ms)"]
    return MetricResult(values=values, notes=notes)


def aggregators(table: pd.DataFrame, names, zero_division: float, scorer=None) -> dict:
    """Latencies are resampled as values (percentiles are not sums); failed calls count."""
    out = {}
    for name in names:
        found = _column_of(name)
        if found and found[0] in table:
            values = pd.to_numeric(table[found[0]], errors="coerce").to_numpy(dtype=float)
            out[name] = apply_aggregator(values, *STATISTICS[found[1]])
            if found[1] in _QUANTILES:  # (its interval: the order statistics', distribution-free)
                out[name].quantile = _QUANTILES[found[1]]
    return out


FAMILY = Family(names.LATENCY, compute, aggregators)
