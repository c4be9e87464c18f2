"""Confidence intervals and paired comparisons, computed from per-example statistics.

Every aggregate metric is rebuilt from the per-example results table as an :class:`Aggregator`:

- ``sum``: the metric is a function of column sums of a per-example matrix (means: ``[value, 1]``;
  precision/recall/...: confusion indicators; corpus BLEU/chrF: sacrebleu's sufficient statistics);
  resampling never calls a judge or re-tokenizes a text (the sacrebleu practice);
- ``apply``: the metric is a function of the resampled values (latency percentiles).

``bootstrap`` draws ``resamples`` index vectors over the examples (seeded: ``seed``), shared by every
metric of a run, and reports the percentile interval. ``paired`` compares two runs on the examples
they share: the difference ``B - A`` with a paired-bootstrap interval, and a two-sided p-value from
an approximate randomization test (each example's pair of results swapped with probability 1/2;
``p = (1 + #{|d*| >= |d|}) / (1 + R)``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from ragmem.metrics import classification, generation, rag, ranking

_BLOCK_ELEMENTS = 5_000_000  # resamples are processed in blocks of at most this many (resample, example) cells


@dataclass
class Aggregator:
    kind: str                                # "sum" or "apply"
    data: np.ndarray                         # (n, m) for sum; (n,) with NaN for missing for apply
    reduce: Callable[[np.ndarray], float | None]
    vreduce: Callable[[np.ndarray], np.ndarray] | None = None  # the same on many rows at once (NaN = undefined)

    def value(self) -> float | None:
        if self.kind == "sum":
            return self.reduce(self.data.sum(axis=0))
        return self.reduce(self.data)

    def reduce_many(self, rows: np.ndarray) -> np.ndarray:
        """The metric on each row of ``rows``: column sums (sum kind) or gathered values (apply kind)."""
        if self.vreduce is not None:
            return self.vreduce(rows)
        values = [self.reduce(row) for row in rows]
        return np.array([np.nan if v is None else v for v in values], dtype=float)

    def with_data(self, data: np.ndarray) -> "Aggregator":
        return Aggregator(self.kind, data, self.reduce, self.vreduce)


def _ratio(zero_division: float):
    def reduce(s):
        if s[1] == 0:
            return None if math.isnan(zero_division) else zero_division
        return s[0] / s[1]
    return reduce


def _vratio(zero_division: float):
    def vreduce(sums):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(sums[:, 1] == 0, zero_division, sums[:, 0] / sums[:, 1])
    return vreduce


def _vmean(sums):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sums[:, 1] == 0, np.nan, sums[:, 0] / sums[:, 1])


def _mean_matrix(values: pd.Series) -> np.ndarray:
    v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    ok = ~np.isnan(v)
    return np.column_stack([np.where(ok, v, 0.0), ok.astype(float)])


def _mean(s):
    return None if s[1] == 0 else s[0] / s[1]


def _stats_matrix(values: pd.Series, width: int) -> np.ndarray:
    rows = []
    for v in values:
        if isinstance(v, str):
            v = json.loads(v)
        rows.append(v if isinstance(v, (list, tuple)) and len(v) == width else [0] * width)
    return np.asarray(rows, dtype=float).reshape(len(rows), width)


def _apply(fn):
    def reduce(values):
        kept = values[~np.isnan(values)]
        return None if kept.size == 0 else float(fn(kept))
    return reduce


def _percentile(q):
    def vfn(v):  # nanpercentile is ~50x slower: use it only when something is missing
        return np.percentile(v, q, axis=1) if not np.isnan(v).any() else np.nanpercentile(v, q, axis=1)
    return vfn


_LATENCY_VFNS = {"avg": lambda v: np.nanmean(v, axis=1), "p50": _percentile(50), "p95": _percentile(95),
                 "p99": _percentile(99), "max": lambda v: np.nanmax(v, axis=1)}


def _vapply(vfn):
    def vreduce(values):
        if np.isnan(values).all(axis=1).any():  # a resample without any measured value: per row
            return np.array([np.nan if np.isnan(r).all() else vfn(r[None, :])[0] for r in values])
        return vfn(values)
    return vreduce


_LATENCY_FNS = {"avg": np.mean, "p50": lambda v: np.percentile(v, 50), "p95": lambda v: np.percentile(v, 95),
                "p99": lambda v: np.percentile(v, 99), "max": np.max}
_LATENCY_SUFFIX = {"avg_latency": "avg", "latency_p50": "p50", "latency_p95": "p95", "latency_p99": "p99",
                   "latency_max": "max"}
_COLUMN_OF = {"avg_coverage": "coverage", "reference_coverage": "reference_coverage"}


def aggregators(table: pd.DataFrame, names: list[str], zero_division: float = 0.0) -> dict[str, Aggregator]:
    """Aggregators for the metric ``names`` that the table's columns support."""
    out: dict[str, Aggregator] = {}
    ok = table["error"].isna() if "error" in table else pd.Series(True, index=table.index)
    scorer = None
    for name in names:
        if name in classification.NAMES and {"label", "verdict"} <= set(table):
            label = pd.to_numeric(table["label"], errors="coerce")
            verdict = pd.to_numeric(table["verdict"], errors="coerce")
            valid = ok & label.notna() & verdict.notna()
            tp = (valid & (label == 1) & (verdict == 1)).astype(float)
            fn = (valid & (label == 1) & (verdict == 0)).astype(float)
            fp = (valid & (label == 0) & (verdict == 1)).astype(float)
            tn = (valid & (label == 0) & (verdict == 0)).astype(float)
            num, den = {"accuracy": (tp + tn, tp + tn + fp + fn), "precision": (tp, tp + fp),
                        "recall": (tp, tp + fn), "f1": (2 * tp, 2 * tp + fp + fn)}[name]
            out[name] = Aggregator("sum", np.column_stack([num, den]), _ratio(zero_division), _vratio(zero_division))
        elif name in ("bleu", "chrf") and f"{name}_stats" in table:
            scorer = scorer or generation.scorer_for()
            width = 10 if name == "bleu" else 18
            reduce_stats = scorer.bleu_from_stats if name == "bleu" else scorer.chrf_from_stats
            matrix = _stats_matrix(table[f"{name}_stats"].where(ok, None), width)
            out[name] = Aggregator("sum", matrix, lambda s, f=reduce_stats: f(s) if s[0] > 0 else None)
        elif name in _LATENCY_SUFFIX or "_latency_" in name:
            if name in _LATENCY_SUFFIX:
                column, suffix = "latency_s", _LATENCY_SUFFIX[name]
            else:
                stage, _, suffix = name.partition("_latency_")
                column = f"stage_{stage}_s"
            if column in table and suffix in _LATENCY_FNS:
                values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
                out[name] = Aggregator("apply", values, _apply(_LATENCY_FNS[suffix]), _vapply(_LATENCY_VFNS[suffix]))
        else:
            column = _COLUMN_OF.get(name, name)
            if column in table and (name in _COLUMN_OF or name in generation.NAMES or name in rag.NAMES
                                    or name.split("_at_")[0] in ranking.RANKING_FAMILIES):
                out[name] = Aggregator("sum", _mean_matrix(table[column].where(ok, None)), _mean, _vmean)
    return out


def resample_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def resample_all(aggs: dict[str, Aggregator], idx: np.ndarray) -> dict[str, np.ndarray]:
    """Every aggregator on the resamples ``idx`` (R, n), processed in blocks of resamples.

    A sum-kind metric of a resample is ``counts @ data``, with ``counts[r, i]`` the number of times
    example ``i`` was drawn in resample ``r``: one BLAS product over the side-by-side data of every
    sum-kind aggregator replaces a gather of (R, n, m) values per aggregator. Apply-kind
    aggregators (percentiles) gather their values.
    """
    n_resamples, n = idx.shape
    out = {name: np.full(n_resamples, np.nan) for name in aggs}
    summed = [(name, agg) for name, agg in aggs.items() if agg.kind == "sum"]
    matrices = [agg.data.reshape(n, -1) for _, agg in summed]
    columns = np.hstack(matrices) if matrices else None
    edges = np.cumsum([0] + [m.shape[1] for m in matrices])
    block = max(1, _BLOCK_ELEMENTS // max(1, n))
    for start in range(0, n_resamples, block):
        part = idx[start:start + block]
        rows = slice(start, start + len(part))
        if summed:
            flat = (np.arange(len(part))[:, None] * n + part).ravel()
            counts = np.bincount(flat, minlength=len(part) * n).reshape(len(part), n).astype(float)
            sums = counts @ columns
            for (name, agg), low, high in zip(summed, edges[:-1], edges[1:]):
                out[name][rows] = agg.reduce_many(sums[:, low:high])
        for name, agg in aggs.items():
            if agg.kind != "sum":
                out[name][rows] = agg.reduce_many(agg.data[part])
    return out


def bootstrap(aggs: dict[str, Aggregator], n: int, resamples: int = 1000, seed: int = 0,
              confidence: float = 0.95) -> dict[str, tuple[float, float] | None]:
    """Percentile bootstrap interval of every aggregator, all on the same resamples."""
    if n == 0 or resamples <= 0:
        return {name: None for name in aggs}
    alpha = (1 - confidence) / 2
    out: dict[str, tuple[float, float] | None] = {}
    for name, values in resample_all(aggs, resample_indices(n, resamples, seed)).items():
        values = values[~np.isnan(values)]
        out[name] = None if values.size == 0 else (float(np.quantile(values, alpha)),
                                                   float(np.quantile(values, 1 - alpha)))
    return out


@dataclass
class PairedResult:
    metric: str
    a: float | None
    b: float | None
    diff: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    n: int

    def to_dict(self) -> dict[str, Any]:
        def f(v):
            return None if v is None else float(v)

        return {"metric": self.metric, "a": f(self.a), "b": f(self.b), "diff": f(self.diff),
                "ci_low": None if self.ci is None else f(self.ci[0]),
                "ci_high": None if self.ci is None else f(self.ci[1]),
                "p_value": f(self.p_value), "n_shared": self.n}


def paired(name: str, a: Aggregator, b: Aggregator, resamples: int = 1000, seed: int = 0,
           confidence: float = 0.95) -> PairedResult:
    """``B - A`` on aligned examples: paired-bootstrap interval and randomization-test p-value."""
    n = len(a.data)
    va, vb = a.value(), b.value()
    if va is None or vb is None or n == 0:
        return PairedResult(name, va, vb, None, None, None, n)
    diff = vb - va
    both = resample_all({"a": a, "b": b}, resample_indices(n, resamples, seed))
    boot = both["b"] - both["a"]
    boot = boot[~np.isnan(boot)]
    alpha = (1 - confidence) / 2
    ci = None if boot.size == 0 else (float(np.quantile(boot, alpha)), float(np.quantile(boot, 1 - alpha)))
    rng = np.random.default_rng(seed + 1)
    extreme = 0
    counted = 0
    for _ in range(resamples):
        swap = rng.random(n) < 0.5
        shape = (n, 1) if a.data.ndim == 2 else (n,)
        mask = swap.reshape(shape)
        a_star = a.with_data(np.where(mask, b.data, a.data)).value()
        b_star = b.with_data(np.where(mask, a.data, b.data)).value()
        if a_star is None or b_star is None:
            continue
        counted += 1
        extreme += abs(b_star - a_star) >= abs(diff) - 1e-12
    p = (1 + extreme) / (1 + counted) if counted else None
    return PairedResult(name, va, vb, diff, ci, p, n)
