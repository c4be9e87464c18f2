"""Confidence intervals and paired comparisons, computed from per-example statistics.

Every aggregate metric is rebuilt from the per-example results table as an
:class:`ragmem.metrics.base.Aggregator`, declared by its metric family:

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

from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pandas as pd

from ragmem.metrics import registry
from ragmem.metrics.base import Aggregator

_BLOCK_ELEMENTS = 1_000_000  # resamples are processed in blocks of at most this many (resample, example) cells
# (a block costs ~5 arrays of 8 bytes a cell at once: 5M cells took 216 MB at 30k examples, 1M 40 MB)


def aggregators(table: pd.DataFrame, names: list[str], zero_division: float = 0.0, scorer=None) -> dict[str, Aggregator]:
    """Aggregators for the metric ``names`` the table's columns support (declared by each metric
    family, see :func:`ragmem.metrics.aggregators`); ``scorer``: the run's generation scorer."""
    return registry.aggregators(table, names, zero_division, scorer)


def resample_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    """All ``resamples`` index vectors at once (R, n): what :func:`resample_blocks` draws block by
    block (tests and small runs; a run never holds this whole matrix)."""
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def resample_blocks(n: int, resamples: int, seed: int) -> Iterator[tuple[int, np.ndarray]]:
    """``(first resample, indices)`` blocks of at most ``_BLOCK_ELEMENTS`` cells, drawn in turn from
    one seeded generator: the same numbers as :func:`resample_indices`, never all held at once
    (at 100k examples x 1000 resamples the whole matrix would take 800 MB)."""
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK_ELEMENTS // max(1, n))
    for start in range(0, resamples, block):
        yield start, rng.integers(0, n, size=(min(block, resamples - start), n))


def resample_all(aggs: dict[str, Aggregator], n: int, resamples: int, seed: int) -> dict[str, np.ndarray]:
    """Every aggregator on ``resamples`` seeded resamples of the ``n`` examples, block by block.

    A sum-kind metric of a resample is ``counts @ data``, with ``counts[r, i]`` the number of times
    example ``i`` was drawn in resample ``r``: one BLAS product over the side-by-side data of every
    sum-kind aggregator replaces a gather of (R, n, m) values per aggregator. Apply-kind
    aggregators (percentiles) gather their values. A two-stage aggregator (``resum``: a metric of
    repeated judge samples) draws each drawn example's data again from ``counts``.
    """
    out = {name: np.full(resamples, np.nan) for name in aggs}
    summed = [(name, agg) for name, agg in aggs.items() if agg.kind == "sum" and agg.resum is None]
    staged = [(name, agg) for name, agg in aggs.items() if agg.resum is not None]
    second = np.random.default_rng([seed, 1])  # the second stage's own stream: the first's numbers stay as they were
    edges = np.cumsum([0] + [agg.data.reshape(n, -1).shape[1] for _, agg in summed])
    columns = np.empty((n, edges[-1])) if summed else None
    for (_, agg), low, high in zip(summed, edges[:-1], edges[1:]):  # side by side, one copy at a time:
        columns[:, low:high] = agg.data.reshape(n, -1)              # each aggregator's own array is
        agg.data = columns[:, low:high].reshape(agg.data.shape)     # let go for its (equal) view
    for start, part in resample_blocks(n, resamples, seed):
        rows = slice(start, start + len(part))
        if summed or staged:
            flat = (np.arange(len(part))[:, None] * n + part).ravel()
            counts = np.bincount(flat, minlength=len(part) * n).reshape(len(part), n).astype(float)
        if summed:
            sums = counts @ columns
            for (name, agg), low, high in zip(summed, edges[:-1], edges[1:]):
                out[name][rows] = agg.reduce_many(sums[:, low:high])
        for name, agg in staged:
            out[name][rows] = agg.reduce_many(agg.resum(second, counts))
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
    for name, values in resample_all(aggs, n, resamples, seed).items():
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
    both = resample_all({"a": a, "b": b}, n, resamples, seed)
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
