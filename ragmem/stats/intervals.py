"""Confidence intervals and paired comparisons, computed from per-example statistics.

Every aggregate metric is rebuilt from the per-example results table as an
:class:`ragmem.metrics.base.Aggregator`, declared by its metric family:

- ``sum``: the metric is a function of column sums of a per-example matrix (means: ``[value, 1]``;
  precision/recall/...: confusion indicators; corpus BLEU/chrF: sacrebleu's sufficient statistics);
  resampling never calls a judge or re-tokenizes a text (the sacrebleu practice);
- ``apply``: the metric is a function of the resampled values (latency percentiles).

``bootstrap`` resamples the examples ``resamples`` times, the same resamples for every metric of a
run, and reports the percentile interval. Two ways to resample (``stats.bootstrap``):

- ``poisson`` (a run's default): each example gets an independent Poisson(1) weight per resample,
  a function of its id, the seed and the resample's number only (:func:`poisson_weights`). Where an
  example sits, how the data is split into chunks, and which process or machine scores it change
  nothing, so intervals can be summed chunk by chunk in one pass; the same example weighs the same
  in two runs, so paired comparisons need no alignment of draws. A resample's size varies
  (its mean is n); for n in the thousands the intervals agree with the classic ones to the Monte
  Carlo error of the resamples (the third decimal);
- ``classic``: ``resamples`` index vectors drawn with replacement from one generator seeded with
  ``seed`` (what runs logged before the Poisson bootstrap used; small in-memory tables: memory
  benchmark questions, the judge sweep).

``paired`` compares two runs on the examples
they share: the difference ``B - A`` with a paired-bootstrap interval, and a two-sided p-value from
an approximate randomization test (each example's pair of results swapped with probability 1/2;
``p = (1 + #{|d*| >= |d|}) / (1 + R)``).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pandas as pd

from ragmem.metrics import registry
from ragmem.metrics.base import Aggregator, WeightedSample
from ragmem.runtime.forking import release_freed_memory
from ragmem.stats.clusters import levels
from ragmem.schema import example_keys  # noqa: F401  (also ragmem.stats.intervals.example_keys)

_BLOCK_ELEMENTS = 1_000_000  # resamples are processed in blocks of at most this many (resample, example) cells
# (a block costs ~5 arrays of 8 bytes a cell at once: 5M cells took 216 MB at 30k examples, 1M 40 MB)


#: Poisson(1)'s distribution function at 0, 1, ..., 12 as 32-bit thresholds: a weight is the number of
#: thresholds at or below a uniform 32-bit draw (weights above 13 have probability < 3e-10, cut at 13)
_POISSON_CDF32 = np.array([min(round(sum(math.exp(-1) / math.factorial(j) for j in range(k + 1)) * 2 ** 32),
                               2 ** 32 - 1) for k in range(13)], dtype=np.uint32)
_AMBIGUOUS = 255


def _bucket_weights() -> np.ndarray:
    """The weight of every 32-bit draw by its top 16 bits, :data:`_AMBIGUOUS` for the few buckets a
    threshold falls inside (their draws are looked up one by one)."""
    low = np.arange(2 ** 16, dtype=np.uint64) << np.uint64(16)
    first = np.searchsorted(_POISSON_CDF32, low, side="right").astype(np.uint8)
    last = np.searchsorted(_POISSON_CDF32, low + np.uint64(2 ** 16 - 1), side="right").astype(np.uint8)
    first[first != last] = _AMBIGUOUS
    return first


_BUCKETS = _bucket_weights()


def _poisson_of(draws: np.ndarray) -> np.ndarray:
    """The number of :data:`_POISSON_CDF32`'s thresholds at or below each 32-bit draw: a table of
    the top 16 bits (three times faster than a binary search of every draw), the draws of the
    buckets a threshold splits searched."""
    weights = _BUCKETS[draws >> 16]
    split = weights == _AMBIGUOUS
    if split.any():
        weights[split] = np.searchsorted(_POISSON_CDF32, draws[split], side="right")
    return weights


_GOLDEN, _M1, _M2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic): a counter to 64 random bits."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def _counter_bits(keys: np.ndarray, salt: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """64 random bits per (counter, example), (len(counters), m): splitmix64(key' + (counter + 1) *
    golden) with key' = splitmix64(key ^ salt). What the Poisson weights and the randomization
    test's swaps are both drawn from, each with its own salt."""
    salted = _mix(np.asarray(keys, dtype=np.uint64) ^ salt)
    return _mix(salted[None, :] + (counters[:, None] + np.uint64(1)) * _GOLDEN)


def poisson_weights(keys: np.ndarray, first: int, count: int, seed: int) -> np.ndarray:
    """Resamples ``first .. first + count - 1``'s Poisson(1) weights of the examples with ``keys``,
    (count, m) floats: weight ``[r, i]`` depends on ``keys[i]``, ``seed`` and ``first + r`` only.

    Resamples 2j and 2j+1 take the two 32-bit halves of splitmix64(key' + (j + 1) * golden), with
    key' = splitmix64(key ^ splitmix64(seed)); each half is turned into a weight by Poisson(1)'s
    distribution function (:data:`_POISSON_CDF32`).
    """
    m = len(keys)
    if count <= 0 or m == 0:
        return np.zeros((max(count, 0), m))
    pairs = np.arange(first // 2, (first + count + 1) // 2, dtype=np.uint64)
    bits = _counter_bits(keys, _mix(np.array([seed % 2 ** 64], dtype=np.uint64)), pairs)
    halves = bits.view(np.uint32).reshape(len(pairs), m, 2)  # little-endian: [..., 0] the low half
    weights = np.empty((len(pairs), 2, m))
    weights[:, 0] = _poisson_of(halves[..., 0])
    weights[:, 1] = _poisson_of(halves[..., 1])
    offset = first % 2
    return weights.reshape(2 * len(pairs), m)[offset:offset + count]


def aggregators(table: pd.DataFrame, names: list[str], zero_division: float = math.nan, scorer=None) -> dict[str, Aggregator]:
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


def poisson_blocks(keys: np.ndarray, resamples: int, seed: int) -> Iterator[tuple[int, np.ndarray]]:
    """``(first resample, weights (b, n))`` blocks of at most ``_BLOCK_ELEMENTS`` cells of the
    examples' Poisson weights (:func:`poisson_weights`), resample after resample."""
    block = max(1, _BLOCK_ELEMENTS // max(1, len(keys)))
    for start in range(0, resamples, block):
        yield start, poisson_weights(keys, start, min(block, resamples - start), seed)


def _draws(n: int, resamples: int, seed: int, keys: np.ndarray | None,
           counted: bool) -> Iterator[tuple[int, Any, np.ndarray | None]]:
    """``(first resample, weights (b, n), indices (b, n) or None)`` blocks of at most
    ``_BLOCK_ELEMENTS`` cells: Poisson weights of the ``keys``, or (classic, ``keys`` None) the
    drawn indices and, when ``counted``, how many times each example was drawn."""
    if keys is not None:
        for start, weights in poisson_blocks(keys, resamples, seed):
            yield start, weights, None
        return
    for start, part in resample_blocks(n, resamples, seed):
        counts = None
        if counted:
            flat = (np.arange(len(part))[:, None] * n + part).ravel()
            counts = np.bincount(flat, minlength=len(part) * n).reshape(len(part), n).astype(float)
        yield start, counts, part


class _Weighted:
    """Apply-kind aggregators on weighted resamples, grouped by their data: the measured values
    (NaN left out) sorted once per group, and per block one :class:`WeightedSample` that every
    statistic of the group reads (latency's avg, p50, p95, p99 and max share one)."""

    def __init__(self, aggs: dict[str, Aggregator]):
        self.groups: dict[bytes, tuple[np.ndarray, np.ndarray, list[tuple[str, Aggregator]]]] = {}
        for name, agg in aggs.items():
            key = hashlib.blake2b(np.ascontiguousarray(agg.data).tobytes(), digest_size=16).digest()
            if key not in self.groups:
                order = np.argsort(agg.data, kind="stable")[:int((~np.isnan(agg.data)).sum())]  # NaN sorts last
                self.groups[key] = (order, agg.data[order], [])
            self.groups[key][2].append((name, agg))

    def reduce(self, weights: np.ndarray) -> Iterator[tuple[str, np.ndarray]]:
        for order, values, members in self.groups.values():
            sample = WeightedSample(values, weights[:, order])
            for name, agg in members:
                if agg.wreduce is not None:
                    yield name, agg.wreduce(sample)
                else:  # the multisets built (an apply aggregator without a weighted form)
                    yield name, agg.reduce_many_ragged([np.repeat(values, row.astype(np.int64)) for row in sample.weights])


def resample_all(aggs: dict[str, Aggregator], n: int, resamples: int, seed: int,
                 keys: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Every aggregator on ``resamples`` seeded resamples of the ``n`` examples, block by block:
    Poisson-weighted by the examples' ``keys`` (:func:`example_keys`), or classic without them.

    A sum-kind metric of a resample is ``weights @ data``, with ``weights[r, i]`` the number of
    copies of example ``i`` in resample ``r``: one BLAS product over the side-by-side data of every
    sum-kind aggregator replaces a gather of (R, n, m) values per aggregator. Apply-kind
    aggregators (percentiles) gather their values (classic) or take them weighted (Poisson). A
    two-stage aggregator (``resum``: a metric of repeated judge samples) draws each copy's data
    again from the weights.
    """
    out = {name: np.full(resamples, np.nan) for name in aggs}
    summed = [(name, agg) for name, agg in aggs.items() if agg.kind == "sum" and agg.resum is None]
    staged = [(name, agg) for name, agg in aggs.items() if agg.resum is not None]
    weighted = _Weighted({n: a for n, a in aggs.items() if a.kind != "sum"}) if keys is not None else None
    second = np.random.default_rng([seed, 1])  # the second stage's own stream: the first's numbers stay as they were
    edges = np.cumsum([0] + [agg.data.reshape(n, -1).shape[1] for _, agg in summed])
    columns: Any = np.empty((n, edges[-1])) if summed else None
    for (_, agg), low, high in zip(summed, edges[:-1], edges[1:]):  # side by side, one copy at a time:
        columns[:, low:high] = agg.data.reshape(n, -1)              # each aggregator's own array is
        agg.data = columns[:, low:high].reshape(agg.data.shape)     # let go for its (equal) view
    for start, weights, part in _draws(n, resamples, seed, keys, bool(summed or staged)):
        rows = slice(start, start + len(weights if part is None else part))
        if summed:
            sums = weights @ columns
            for (name, agg), low, high in zip(summed, edges[:-1], edges[1:]):
                out[name][rows] = agg.reduce_many(sums[:, low:high])
        for name, agg in staged:
            out[name][rows] = agg.reduce_many(agg.resum(second, weights))  # type: ignore[misc]  # (staged: set)
        for name, values in weighted.reduce(weights) if weighted is not None else ():
            out[name][rows] = values
        for name, agg in aggs.items() if weighted is None else ():
            if agg.kind != "sum":
                out[name][rows] = agg.reduce_many(agg.data[part])
    return out



def two_stage(samples: int) -> bool:
    """Whether ``judge.samples`` makes the judged metrics two-stage: with more than one sample per
    verdict, an interval's second stage draws each example's samples by position, so it is neither
    summed chunk by chunk (:class:`ragmem.stats.run_statistics.RunStatistics`) nor paired by id chunk
    by chunk (:mod:`ragmem.stats.paired_runs`), and a run refuses a dataset larger than
    ``data.chunk_size`` with it (:func:`ragmem.run.pipeline.load`). The one statement of that rule."""
    return samples > 1


def by_chunk(agg: Aggregator) -> bool:
    """Whether an aggregate's intervals add up chunk by chunk: every one but a two-stage one
    (:func:`two_stage`; ``resum``, the second stage over repeated samples)."""
    return agg.resum is None


def percentile(values: np.ndarray, confidence: float, clusters: int | None = None) -> tuple[float, float] | None:
    """The percentile interval of resampled ``values`` (NaN left out; ``None`` when none is left):
    at ``α / 2`` and ``1 - α / 2``, or with ``clusters`` the expanded levels of a cluster bootstrap
    (:func:`ragmem.stats.clusters.levels`)."""
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None
    low, high = levels(confidence, clusters)
    return float(np.quantile(values, low)), float(np.quantile(values, high))


def quantile_interval(values: np.ndarray, q: float, confidence: float = 0.95) -> tuple[float, float] | None:
    """The distribution-free interval of the ``q`` quantile (0 < q < 1) from order statistics
    (Hahn & Meeker, *Statistical Intervals*, 2nd ed., section 5.2): for independent values, the
    true quantile lies below the k-th smallest with probability ``B(k - 1)``, B the Binomial(n, q)
    distribution function, whatever their distribution. The ends are the order statistics whose
    ``B(k - 1)`` is nearest ``α/2`` and ``1 - α/2``, so the interval's coverage is exactly
    ``B(u - 1) - B(l - 1)``, near the level asked on either side of it (the conservative choice,
    at or beyond each tail, covers 0.99 for a p95 of 100 values; this one 0.947, and the
    percentile bootstrap 0.90: ``benchmarks/bench_coverage.py``). When the upper rank passes n (too
    few values for the tail: 30 for a p95) the largest value is the upper end, and the interval
    covers less than asked. NaN values are left out; ``None`` without any.

    >>> quantile_interval(np.arange(1.0, 101.0), 0.5), quantile_interval(np.arange(1.0, 101.0), 0.95)
    ((41.0, 60.0), (91.0, 99.0))
    """
    values = np.sort(values[~np.isnan(values)])
    n = len(values)
    if n == 0:
        return None
    from scipy.special import bdtr  # (the binomial distribution function; scipy.stats takes 0.3 s to import)

    alpha = (1 - confidence) / 2
    cdf = bdtr(np.arange(n + 1), n, q)  # B(k - 1) for the ranks k = 1..n+1

    def at(target: float) -> float:  # the order statistic whose rank's B(k - 1) is nearest the target
        rank = int(np.argmin(np.abs(cdf - target))) + 1
        return float(values[min(max(rank, 1), n) - 1])

    return at(alpha), at(1 - alpha)


def bootstrap(aggs: dict[str, Aggregator], n: int, resamples: int = 1000, seed: int = 0,
              confidence: float = 0.95, keys: np.ndarray | None = None,
              clusters: int | None = None) -> dict[str, tuple[float, float] | None]:
    """Percentile bootstrap interval of every aggregator, all on the same resamples (Poisson-weighted
    by the examples' ``keys``, classic without them); ``clusters``: how many clusters the ``keys``
    name, when they are clusters' (:mod:`ragmem.stats.clusters`: expanded percentile levels)."""
    if n == 0 or resamples <= 0:
        return {name: None for name in aggs}
    exact = {name: agg for name, agg in aggs.items() if agg.quantile is not None and clusters is None}
    out = {name: percentile(values, confidence, clusters)
           for name, values in resample_all({k: a for k, a in aggs.items() if k not in exact}, n, resamples, seed,
                                            keys).items()}
    out.update({name: quantile_interval(np.asarray(agg.data, dtype=float), float(agg.quantile or 0), confidence)
                for name, agg in exact.items()})  # a percentile of independent values: its order statistics'
    out = {name: out[name] for name in aggs}
    release_freed_memory()  # the blocks' arrays: what glibc keeps of them (about 40 MB at 10k examples)
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
    clusters: int | None = None  # the clusters the examples were resampled in (stats.cluster_by); None: examples

    def to_dict(self) -> dict[str, Any]:
        def f(v):
            return None if v is None else float(v)

        return {"metric": self.metric, "a": f(self.a), "b": f(self.b), "diff": f(self.diff),
                "ci_low": None if self.ci is None else f(self.ci[0]),
                "ci_high": None if self.ci is None else f(self.ci[1]),
                "p_value": f(self.p_value), "n_shared": self.n,
                **({} if self.clusters is None else {"n_clusters": self.clusters})}


def paired(name: str, a: Aggregator, b: Aggregator, resamples: int = 1000, seed: int = 0,
           confidence: float = 0.95, keys: np.ndarray | None = None, permutations: int | None = None,
           clusters: int | None = None) -> PairedResult:
    """``B - A`` on aligned examples: paired-bootstrap interval (Poisson-weighted by the examples'
    ``keys``, classic without them) and randomization-test p-value (``permutations``, default
    ``resamples``). With ``clusters`` the ``keys`` are the clusters' (whole clusters weighed and
    swapped together) and the interval's levels expanded (:func:`ragmem.stats.clusters.levels`)."""
    n = len(a.data)
    va, vb = a.value(), b.value()
    if va is None or vb is None or n == 0:
        return PairedResult(name, va, vb, None, None, None, n, clusters)
    diff = vb - va
    both = resample_all({"a": a, "b": b}, n, resamples, seed, keys)
    ci = percentile(both["b"] - both["a"], confidence, clusters)
    p = randomization_p(a, b, diff, resamples if permutations is None else permutations, seed, keys)
    return PairedResult(name, va, vb, diff, ci, p, n, clusters)


def randomization_p(a: Aggregator, b: Aggregator, diff: float, permutations: int, seed: int,
                    keys: np.ndarray | None = None) -> float | None:
    """Two-sided p-value of ``diff`` (B - A) by approximate randomization: in each of
    ``permutations``, each example's pair of results is swapped with probability 1/2;
    ``p = (1 + #{|d*| >= |d|}) / (1 + #permutations where both are defined)``.

    With ``keys`` (the Poisson bootstrap's runs) the swaps follow the example ids (:func:`swaps`)
    and a sum-kind metric is permuted as sums, ``A* = ΣA + S (B - A)`` for a block of swap rows
    ``S``: one product per block, in any chunking. Without them, the swaps come from one generator
    seeded ``seed + 1``, permutation after permutation, as before the Poisson bootstrap.
    """
    n = len(a.data)
    extreme = counted = 0
    if keys is not None and a.kind == b.kind == "sum" and a.resum is None and b.resum is None:
        first, second = a.data.reshape(n, -1), b.data.reshape(n, -1)
        moved_by, sum_a, sum_b = second - first, first.sum(axis=0), second.sum(axis=0)
        for _, swapped in swap_blocks(keys, permutations, seed):
            moved = swapped.astype(float) @ moved_by
            a_star, b_star = a.reduce_many(sum_a + moved), b.reduce_many(sum_b - moved)
            defined = ~np.isnan(a_star) & ~np.isnan(b_star)
            counted += int(defined.sum())
            extreme += int((np.abs(b_star - a_star)[defined] >= abs(diff) - 1e-12).sum())
        return (1 + extreme) / (1 + counted) if counted else None
    rng = np.random.default_rng(seed + 1)
    shape = (n, 1) if a.data.ndim == 2 else (n,)
    drawn = (row for _, block in swap_blocks(keys, permutations, seed) for row in block) if keys is not None \
        else (rng.random(n) < 0.5 for _ in range(permutations))
    for swap in drawn:
        mask = swap.reshape(shape)
        one = a.with_data(np.where(mask, b.data, a.data)).value()
        other = b.with_data(np.where(mask, a.data, b.data)).value()
        if one is None or other is None:
            continue
        counted += 1
        extreme += abs(other - one) >= abs(diff) - 1e-12
    return (1 + extreme) / (1 + counted) if counted else None


_SWAP_DOMAIN = np.uint64(0x72616E646F6D697A)  # keeps the swaps' stream apart from the weights' of the same seed


def swap_blocks(keys: np.ndarray, permutations: int, seed: int) -> Iterator[tuple[int, np.ndarray]]:
    """``(first permutation, swaps (b, n))`` blocks of at most ``_BLOCK_ELEMENTS`` cells of the
    examples' swaps (:func:`swaps`), permutation after permutation."""
    block = max(1, _BLOCK_ELEMENTS // max(1, len(keys)))
    for start in range(0, permutations, block):
        yield start, swaps(keys, start, min(block, permutations - start), seed)


def swaps(keys: np.ndarray, first: int, count: int, seed: int) -> np.ndarray:
    """Permutations ``first .. first + count - 1``'s swaps of the examples with ``keys``, (count, m)
    booleans: swap ``[p, i]`` is bit ``p % 64`` of splitmix64(key' + (p // 64 + 1) * golden), with
    key' = splitmix64(key ^ splitmix64(seed) ^ domain): a function of the id, the seed and ``p`` only."""
    m = len(keys)
    words = np.arange(first // 64, (first + count + 63) // 64, dtype=np.uint64)
    bits = _counter_bits(keys, _mix(np.array([seed % 2 ** 64], dtype=np.uint64)) ^ _SWAP_DOMAIN, words)
    unpacked = np.unpackbits(bits.view(np.uint8).reshape(len(words), m, 8), axis=2, bitorder="little")
    flat = unpacked.transpose(0, 2, 1).reshape(len(words) * 64, m)
    return flat[first % 64:first % 64 + count].astype(bool)
