"""A run's metrics from its examples chunk by chunk, in one pass, holding nothing per example but
the measured latencies.

Each scored chunk (its per-example table, its families' :class:`~ragmem.metrics.base.MetricResult`
and its aggregators: :func:`ragmem.run.pipeline.run_aggregators`) leaves behind:

- the column sums of every sum-kind aggregator (means, ratios, confusion indicators, sacrebleu's
  statistics, the PPI sums, the per-source shares) and, for each resample of the Poisson bootstrap,
  their weighted sums ``weights @ data`` (R x m per metric). An example's weights are a function of
  its id, the seed and the resample's number (:func:`ragmem.stats.intervals.poisson_weights`), so how the
  examples are split into chunks changes nothing but the order in which sums are added;
- the counts (``n_*``, ``confusion_*``, ``*_failures`` and the undefined cases), added;
- for apply-kind aggregators (latency percentiles: not a function of sums), the values and the
  examples' keys: 16 bytes an example, the one thing kept per example.

:meth:`RunStatistics.values` and :meth:`RunStatistics.intervals` then equal what
:func:`ragmem.run.pipeline.score` computes on the whole table: the values to 1e-9 and the intervals
of the Poisson bootstrap to ~12 digits (sums added in another order), whatever the chunk sizes.
A two-stage aggregator (``judge.samples`` > 1: its second stage draws by position) and the classic
bootstrap (one generator over the whole table) cannot be summed by chunk: :meth:`RunStatistics.add`
refuses the first, and the classic bootstrap is not offered here.

Clustered runs (``stats.cluster_by``: the table has a ``cluster`` column) draw every weight and swap
from the example's cluster's key instead (:func:`ragmem.stats.clusters.resampling_keys`), keep the
clusters' keys (how many there are sets the expanded levels of :func:`ragmem.stats.clusters.levels`)
and the weighted sums of the example bootstrap beside the cluster one, for the design effects
(:meth:`RunStatistics.design_effects`).
"""

from __future__ import annotations

import collections
import hashlib
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from ragmem.metrics.base import Aggregator, MetricResult
from ragmem.metrics.catalogue import is_count
from ragmem.stats import clusters
from ragmem.stats import intervals as stats

__all__ = ["RunStatistics", "additive"]


def additive(name: str) -> bool:
    """Whether a value is a count that chunks add up (``n_*``, ``confusion_*``, ``*_failures``: the
    catalogue's counts; an ``undefined_*`` count is kept apart, with the metric it belongs to)."""
    return is_count(name) and not name.startswith("undefined_")


class RunStatistics:
    """What a run's metrics and intervals are rebuilt from, chunk after chunk (:meth:`add`)."""

    def __init__(self, resamples: int = 1000, seed: int = 0, confidence: float = 0.95, permutations: int = 0):
        self.resamples, self.seed, self.confidence = resamples, seed, confidence
        self.permutations = permutations  # > 0: the randomization test's swap sums kept too (ragmem.stats.paired_runs)
        self.n = 0
        self.names: dict[str, None] = {}       # every value's name, in the order first reported
        self.counts: dict[str, float] = {}
        self._undefined: collections.Counter = collections.Counter()  # undefined examples, added
        self._whole_undefined: set[str] = set()  # aggregates undefined as a whole (0/0 of the sums)
        self._notes: dict[str, Any] = {}     # by text, or a counted note's key (a ragmem.metrics.base.Note)
        self._counted: dict[str, tuple] = {}
        self.unmerged: set[str] = set()        # values with neither statistics nor a count form
        self._reducers: dict[str, Aggregator] = {}    # each aggregator without its data
        self._sums: dict[str, np.ndarray] = {}
        self._boot: dict[str, np.ndarray] = {}
        self._swapped: dict[str, np.ndarray] = {}     # permutation p's sums of the examples it swaps
        self._keys: list[np.ndarray] = []             # the examples' keys, when apply-kind values are kept
        self._wkeys: list[np.ndarray] = []            # ... and the keys their weights are drawn from (clusters')
        self._alone: dict[str, np.ndarray] = {}       # clustered: each resample's sums of the example bootstrap
        self._groups: np.ndarray | None = None        # clustered: the clusters' keys
        self._applied: dict[str, list[np.ndarray]] = {}

    def add(self, table: pd.DataFrame, result: MetricResult, aggs: dict[str, Aggregator]) -> None:
        """One scored chunk: its table (the ids), its families' result, and its aggregators."""
        self.merge(self.of_chunk(table, result, aggs, self.resamples, self.seed, self.confidence))

    @classmethod
    def of_chunk(cls, table: pd.DataFrame, result: MetricResult, aggs: dict[str, Aggregator],
                 resamples: int = 1000, seed: int = 0, confidence: float = 0.95,
                 permutations: int = 0, keys: np.ndarray | None = None) -> "RunStatistics":
        """One scored chunk's statistics alone (a Dask worker's, merged in the flow: :meth:`merge`);
        ``keys``: its examples' keys, when already known."""
        one = cls(resamples, seed, confidence, permutations)
        one.n = n = len(table)
        for name, value in result.values.items():
            one.names.setdefault(name)
            if name in aggs:
                continue
            if additive(name):
                if value is not None:
                    one.counts[name] = value
            else:
                one.unmerged.add(name)
        whole = {k for k in result.undefined if getattr(aggs.get(k), "undefined", None) is not None}
        one._undefined.update({k: v for k, v in result.undefined.items() if k not in whole})
        one._whole_undefined = whole
        for note in result.notes:
            one._notes.setdefault(getattr(note, "key", "") or str(note), note)
        staged = [name for name, agg in aggs.items() if not stats.by_chunk(agg)]
        if staged:
            raise ValueError(f"{', '.join(staged)}: two-stage intervals (judge.samples > 1) are not summed by chunk")
        keys = stats.example_keys(table["id"]) if keys is None else keys
        weighed = clusters.table_keys(table) if clusters.COLUMN in table else keys
        if clusters.COLUMN in table:
            one._groups = np.unique(weighed)
        for name, agg in aggs.items():
            width = agg.data.reshape(n, -1).shape[1] if agg.kind == "sum" else 1
            one._reducers[name] = agg.with_data(np.zeros((0, width)) if agg.kind == "sum" else np.zeros(0))
        one._add_sums({name: agg for name, agg in aggs.items() if agg.kind == "sum"}, weighed, n,
                      keys if one._groups is not None else None)
        applied = {name: np.asarray(agg.data, dtype=float) for name, agg in aggs.items() if agg.kind != "sum"}
        if applied or permutations:  # (a paired comparison aligns the two runs' values by key)
            one._keys, one._wkeys = [keys], [weighed]
            shared: dict[bytes, np.ndarray] = {}  # one array per distinct column (latency's five metrics)
            for name, data in applied.items():
                digest = hashlib.blake2b(np.ascontiguousarray(data).tobytes(), digest_size=16).digest()
                one._applied[name] = [shared.setdefault(digest, data)]
        return one

    def merge(self, other: "RunStatistics") -> None:
        """The statistics of the chunks after this one's (``other``, of the same settings) added."""
        for name in other.names:
            self.names.setdefault(name)
        for name, value in other.counts.items():
            self.counts[name] = self.counts.get(name, 0.0) + value
        self._undefined.update(other._undefined)
        self._whole_undefined |= other._whole_undefined
        self.unmerged |= other.unmerged
        for key, note in other._notes.items():
            kept = self._notes.setdefault(key, note)
            if kept is not note and getattr(note, "render", None) is not None:  # counts added
                mine, theirs = self._counted.get(key, kept.counts), other._counted.get(key, note.counts)
                self._counted[key] = tuple(a + b for a, b in zip(mine, theirs))
        for name, agg in other._reducers.items():
            self._reducers.setdefault(name, agg)
        if self._groups is not None or other._groups is not None:
            for name in {*self._boot, *other._boot}:  # (a chunk without clusters: its weights are the examples')
                if name in self._boot or name in other._boot:
                    held = self._alone.get(name, self._boot.get(name))
                    added = other._alone.get(name, other._boot.get(name))
                    self._alone[name] = added.copy() if held is None else held if added is None else held + added  # type: ignore[union-attr]
            groups = [g for g in (self._groups, other._groups) if g is not None]
            self._groups = np.union1d(*groups) if len(groups) == 2 else groups[0]
        for name, totals in other._sums.items():
            if name in self._sums:
                self._sums[name] = self._sums[name] + totals
                self._boot[name] = self._boot[name] + other._boot[name]
                if name in other._swapped:
                    self._swapped[name] = self._swapped[name] + other._swapped[name]
            else:
                self._sums[name], self._boot[name] = totals.copy(), other._boot[name].copy()
                if name in other._swapped:
                    self._swapped[name] = other._swapped[name].copy()
        if other._keys or self._keys:  # apply-kind values: NaN (weighing nothing) where a side had none
            self._keys = (self._keys or [np.zeros(self.n, dtype=np.uint64)]) + (other._keys or [np.zeros(other.n, dtype=np.uint64)])
            self._wkeys = (self._wkeys or [np.zeros(self.n, dtype=np.uint64)]) + (other._wkeys or [np.zeros(other.n, dtype=np.uint64)])
            for name in {*self._applied, *other._applied}:
                before = self._applied.get(name) or [np.full(self.n, np.nan)]
                self._applied[name] = before + (other._applied.get(name) or [np.full(other.n, np.nan)])
        self.n += other.n

    def _add_sums(self, summed: dict[str, Aggregator], keys: np.ndarray, n: int, alone: np.ndarray | None = None) -> None:
        """The column sums, and each resample's weighted sums (one product per block of resamples
        over the chunk's side-by-side data, as :func:`ragmem.stats.intervals.resample_all`); the
        weights drawn from ``keys`` (clusters' in a clustered run, whose examples' own ``alone``
        weigh the example bootstrap's sums too)."""
        if not summed:
            return
        columns = np.hstack([agg.data.reshape(n, -1) for agg in summed.values()])
        edges = np.cumsum([0] + [agg.data.reshape(n, -1).shape[1] for agg in summed.values()])
        boot = np.zeros((self.resamples, columns.shape[1]))
        swapped = np.zeros((self.permutations, columns.shape[1]))
        # one BLAS thread: a product split between threads adds in another order, and a Dask worker
        # has one (Dask's default); so a chunk's sums are the same bits wherever it is scored
        with threadpool_limits(1, user_api="blas"):
            for start, weights in stats.poisson_blocks(keys, self.resamples, self.seed):
                boot[start:start + len(weights)] = weights @ columns
            for start, swaps in stats.swap_blocks(keys, self.permutations, self.seed):
                swapped[start:start + len(swaps)] = swaps.astype(float) @ columns
            single: Any = np.zeros((self.resamples, columns.shape[1])) if alone is not None else None
            for start, weights in stats.poisson_blocks(alone, self.resamples, self.seed) if alone is not None else ():
                single[start:start + len(weights)] = weights @ columns
        totals = columns.sum(axis=0)
        for name, low, high in zip(summed, edges[:-1], edges[1:]):
            self._sums[name], self._boot[name] = totals[low:high].copy(), boot[:, low:high].copy()
            if single is not None:
                self._alone[name] = single[:, low:high].copy()
            if self.permutations:
                self._swapped[name] = swapped[:, low:high].copy()

    @property
    def notes(self) -> list[str]:
        """The chunks' notes, each once, in the order first given: a counted one with its counts
        added, one that holds only while some values stay undefined left out once one is defined."""
        values = self.values()
        out = []
        for key, note in sorted(self._notes.items(), key=lambda item: getattr(item[1], "order", ())):
            if getattr(note, "render", None) is not None:
                out.append(note.render(*self._counted.get(key, note.counts)))
            elif not any(values.get(name) is not None for name in getattr(note, "unless", ())):
                out.append(str(note))
        return out

    @property
    def undefined(self) -> dict[str, int]:
        """Undefined cases per metric: undefined examples added up, and an aggregate's own 0/0
        (precision's: 1 when its summed denominator is 0)."""
        out = dict(self._undefined)
        for name in self._whole_undefined:
            count = self._reducers[name].undefined  # (set for every name of _whole_undefined)
            out[name] = 0 if count is None else count(self._sums[name])
        return out

    def values(self) -> dict[str, float | None]:
        """Every value the chunks reported (in that order, then those only their sums define)."""
        out: dict[str, float | None] = {}
        for name in [*self.names, *(n for n in self._reducers if n not in self.names)]:
            if name in self._reducers:
                value = self._value(name)
                if value is not None or name in self.names:
                    out[name] = value
            else:
                out[name] = self.counts.get(name)
        return out

    def _value(self, name: str) -> float | None:
        agg = self._reducers[name]
        if agg.kind == "sum":
            value = agg.reduce(self._sums[name])
        else:
            value = agg.reduce(np.concatenate(self._applied[name]))
        return None if value is None else float(value)

    def intervals(self, names=None) -> dict[str, tuple[float, float] | None]:
        """The interval of every value with statistics (``names``: of these only): its own
        (pass_rate_ppi's), else the percentile interval of the Poisson bootstrap."""
        names = [n for n in (names if names is not None else self._reducers) if n in self._reducers]
        out: dict[str, tuple[float, float] | None] = {}
        groups = clusters.resampled(self.n_clusters)
        boot = self._boot if groups is not None or self.n_clusters is None else self._alone  # too few: examples
        applied = {}
        for name in names:
            agg = self._reducers[name]
            if agg.kind != "sum":
                applied[name] = agg.with_data(np.concatenate(self._applied[name]))
            elif agg.interval is not None:
                out[name] = agg.interval(self._sums[name]) if self._value(name) is not None else None
            elif self.resamples > 0 and self.n:
                out[name] = stats.percentile(agg.reduce_many(boot[name]), self.confidence, groups)
            else:
                out[name] = None
        if applied:
            keys = np.concatenate(self._wkeys if groups is not None else self._keys)
            out.update(stats.bootstrap(applied, len(keys), self.resamples, self.seed, self.confidence, keys, groups))
        return {name: out[name] for name in names}

    @property
    def n_clusters(self) -> int | None:
        """How many clusters the examples came in (``stats.cluster_by``); ``None`` unclustered."""
        return None if self._groups is None else len(self._groups)

    def design_effects(self, names) -> dict[str, float | None]:
        """Each of ``names``' design effect (:func:`ragmem.stats.clusters.design_effect`): its cluster
        bootstrap's variance over its example bootstrap's; empty unclustered."""
        if self._groups is None or self.resamples <= 0:
            return {}
        out: dict[str, float | None] = {}
        for name in (n for n in names if n in self._reducers):
            agg = self._reducers[name]
            if agg.kind == "sum" and agg.interval is None and name in self._alone:
                out[name] = clusters.design_effect(agg.reduce_many(self._boot[name]), agg.reduce_many(self._alone[name]))
            elif agg.kind != "sum":
                data = np.concatenate(self._applied[name])
                both = [stats.resample_all({name: agg.with_data(data)}, len(data), self.resamples, self.seed,
                                           np.concatenate(keys))[name] for keys in (self._wkeys, self._keys)]
                out[name] = clusters.design_effect(*both)
        return out

    def __contains__(self, name: str) -> bool:
        """Whether some chunk had an aggregator of ``name``."""
        return name in self._reducers

    def paired(self, other: "RunStatistics", name: str) -> stats.PairedResult:
        """``other - self`` for ``name``, both the statistics of the same examples kept with
        ``permutations`` (two runs' shared examples, :mod:`ragmem.stats.paired_runs`): what
        :func:`ragmem.stats.intervals.paired` gives on the two tables aligned, from sums. The Poisson weights
        and the swaps are functions of an example's key, so resample r's difference is
        ``reduce(B_r) - reduce(A_r)`` of each run's own weighted sums, and permutation p moves
        ``S_p B - S_p A`` from one run to the other. Apply-kind values are aligned by key first."""
        mine, theirs = self._reducers[name], other._reducers[name]
        if mine.kind != "sum" or theirs.kind != "sum":
            (keys, a), (_, b) = self._aligned(name), other._aligned(name)
            return stats.paired(name, a, b, self.resamples, self.seed, self.confidence, keys, self.permutations or None,
                                clusters.resampled(self.n_clusters))
        va, vb = self._value(name), other._value(name)
        if va is None or vb is None or self.n == 0:
            return stats.PairedResult(name, va, vb, None, None, None, self.n, self.n_clusters)
        diff = vb - va
        groups = clusters.resampled(self.n_clusters)
        drawn = (self._boot, other._boot) if groups is not None or self.n_clusters is None else (self._alone, other._alone)
        ci = stats.percentile(theirs.reduce_many(drawn[1][name]) - mine.reduce_many(drawn[0][name]), self.confidence, groups)
        moved = other._swapped[name] - self._swapped[name]
        a_star = mine.reduce_many(self._sums[name] + moved)
        b_star = theirs.reduce_many(other._sums[name] - moved)
        defined = ~np.isnan(a_star) & ~np.isnan(b_star)
        extreme = int((np.abs(b_star - a_star)[defined] >= abs(diff) - 1e-12).sum())
        p = (1 + extreme) / (1 + int(defined.sum())) if defined.any() else None
        return stats.PairedResult(name, va, vb, diff, ci, p, self.n, self.n_clusters)

    def unpaired(self, other: "RunStatistics", name: str) -> dict[str, Any] | None:
        """``other - self`` for ``name`` when the two are statistics of *different* examples (two windows
        of traffic: two samples, not pairs): each run's Poisson bootstrap drawn on its own (``other``
        built with another seed, so the two draws are independent even where examples share a
        cluster), resample r's difference ``reduce(B_r) - reduce(A_r)``; the interval its
        percentiles, the p-value the bootstrap's two-sided one (twice the smaller share of resampled
        differences on either side of 0, at most 1). A percentile (apply-kind: not summed) is
        recomputed on each run's own resamples of its values. ``None`` for a value a run lacks."""
        mine, theirs = self._reducers.get(name), other._reducers.get(name)
        if mine is None or theirs is None:
            return None
        va, vb = self._value(name), other._value(name)
        out = {"metric": name, "a": va, "b": vb, "diff": None, "ci_low": None, "ci_high": None, "p_value": None,
               "n_a": self.n, "n_b": other.n}
        if va is None or vb is None or not self.resamples:
            return out
        if mine.kind != "sum" or theirs.kind != "sum":  # a percentile: each run's values resampled on their own
            (keys_a, a), (keys_b, b) = self._aligned(name), other._aligned(name)
            drawn = (stats.resample_all({name: b}, len(keys_b), self.resamples, other.seed, keys_b)[name]
                     - stats.resample_all({name: a}, len(keys_a), self.resamples, self.seed, keys_a)[name])
        else:
            drawn = theirs.reduce_many(other._boot[name]) - mine.reduce_many(self._boot[name])
        drawn = drawn[~np.isnan(drawn)]
        ci = stats.percentile(drawn, self.confidence)
        if ci is not None:
            p = min(1.0, 2 * min(float((drawn <= 0).mean()), float((drawn >= 0).mean())))
            out.update(diff=vb - va, ci_low=ci[0], ci_high=ci[1], p_value=max(p, 1 / (1 + drawn.size)))
        return out

    def _aligned(self, name: str) -> tuple[np.ndarray, Aggregator]:
        """The keys the examples' weights are drawn from (their clusters' when clustered), in the
        order of the examples' own keys, and an apply-kind aggregator with its values in that order."""
        keys = np.concatenate(self._keys) if self._keys else np.zeros(0, dtype=np.uint64)
        weighed = np.concatenate(self._wkeys) if self._wkeys and clusters.resampled(self.n_clusters) else keys
        values = np.concatenate(self._applied[name]) if self._applied.get(name) else np.zeros(0)
        order = np.argsort(keys, kind="stable")
        return weighed[order], self._reducers[name].with_data(values[order])
