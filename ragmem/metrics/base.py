"""What every metric family declares and returns, and the helpers they share.

A family (one module: ``classification``, ``coverage``, ``latency``, ``ranking``, ``generation``,
``rag``, ``per_source``) ends with ``FAMILY = Family(...)``: the names a user may select, how a
selector expands (``ndcg_at_k`` -> ``ndcg_at_1, ...``), the per-example computation and the
aggregators, the per-example sufficient statistics the bootstrap resamples. The registry
(:mod:`ragmem.metrics`) only iterates over families.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from ragmem.metrics.names import DEFAULT_KS, Names
from ragmem.metrics.options import GenerationOptions, RagOptions
from ragmem.metrics.scorer import scorer_for
from ragmem.runtime.parallel import Pending, SERIAL


@dataclass
class MetricResult:
    """Aggregates (``None`` = not defined for this run, e.g. no labels), optional per-example
    columns to add to the results table, and the number of undefined (0/0) cases per metric."""

    values: dict[str, float | None]
    columns: dict[str, list[Any]] = field(default_factory=dict)
    undefined: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    ci: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # bootstrap intervals
    # per-example statistics (one row per table row) of values that no table column rebuilds: those
    # that need the family's settings or figures it keeps to itself (a RAG metric's pass rate, the
    # per-source shares, the PPI estimate); what a run's chunks add up (ragmem.stats.run_statistics) and intervals
    statistics: dict[str, "Aggregator"] = field(default_factory=dict)
    # stats.cluster_by's run: the unit of resampling, how many, and the design effects
    # (ragmem.stats.clusters.describe); None when examples are resampled alone
    clusters: dict[str, Any] | None = None
    # gates.stop_when_decided: the run stopped judging once its gates were decided (ragmem.run.deciding)
    decided: dict[str, Any] | None = None


def nanmean(values: Iterable[float | None]) -> float | None:
    """Mean of the finite values; ``None`` when there are none (nothing to average is not 0)."""
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return sum(kept) / len(kept) if kept else None




class Note(str):
    """A note whose truth depends on the whole run, for a run scored in chunks
    (:class:`ragmem.stats.run_statistics.RunStatistics`): ``counts`` added across chunks and the text made
    again by ``render(*counts)`` (:func:`counted_note`), or true only while every one of
    ``unless`` stays undefined (:func:`unless_note`: "no labels in the dataset"). Other notes are
    kept once. A ``Note`` is a ``str``; ``str(note)`` is its plain text."""

    key: str = ""
    order: tuple = ()          # (family, position): where the note stands among a run's notes
    counts: tuple = ()
    render: Callable[..., str] | None = None
    unless: tuple[str, ...] = ()


def placed_note(note: str, order: tuple) -> Note:
    """``note`` (a :class:`Note` or plain text) with its place among the run's notes."""
    placed = Note(note)
    placed.__dict__.update(getattr(note, "__dict__", {}))
    placed.order = order
    return placed


def counted_note(key: str, render: Callable[..., str], *counts) -> Note:
    """``render(*counts)``, whose counts chunks add up (``key`` tells the same note of two chunks)."""
    note = Note(render(*counts))
    note.key, note.counts, note.render = key, counts, render
    return note


def unless_note(text: str, *names: str) -> Note:
    """``text``, dropped from a chunked run's notes once any of ``names`` has a value."""
    note = Note(text)
    note.unless = names
    return note


@dataclass(frozen=True)
class MetricContext:
    """Settings metrics need besides the table."""

    keywords: Any                      # ragmem.text.keywords.KeywordExtractor
    zero_division: float = math.nan  # (config key zero_division: undefined is null, never 0)
    ks: tuple[int, ...] = DEFAULT_KS
    relevance: str = "auto"            # where gold relevance comes from (see docs/metrics.md: Ranking)
    keyword_threshold: float = 0.5     # a context is relevant when it holds > this share of K(reference)
    generation: Any = GenerationOptions()  # generation.* (ragmem.config.settings.GenerationSettings)
    rag: Any = RagOptions()                # rag_metrics.* (ragmem.config.settings.RagMetricSettings)
    llm: Any = None        # ragmem.clients.llm_client.JudgeClient: LLM-based metrics (else their offline modes)
    embedder: Any = None   # ragmem.clients.llm_client.EmbeddingClient
    mapper: Any = None     # ragmem.runtime.parallel mapper of the text-heavy work (None: in this process)
    early: Any = None      # ragmem.runtime.parallel.EarlyMaps begun while the agent ran (their results are reused)
    judge: Any = None      # judge.* (ragmem.config.settings.JudgeSettings): the reliability family's threshold moves
    confidence: float = 0.95  # stats.confidence: the level of intervals a family computes itself (pass_rate_ppi)
    rubrics: tuple = ()       # the config's rubrics (ragmem.prompts.rubrics.Rubric): the metrics rubric_<name>
    custom: tuple = ()        # metrics of one's own (ragmem.metrics.custom.CustomMetric): metrics.custom
    started: dict = field(default_factory=dict, compare=False, repr=False)  # see start()
    _rows: list = field(default_factory=list, compare=False, repr=False)     # see rows()

    def map(self, fn, items, *args):
        """``fn(chunk, *args)`` over chunks of ``items``, results in order (see :mod:`ragmem.runtime.parallel`);
        a map :meth:`start` began with the same arguments is collected instead, and the items
        :attr:`early` maps began on are taken from them."""
        begun = self.started.pop((fn, args), None)
        if begun is not None and begun[0] == items:
            return begun[1].result()
        return self._begin(fn, items, args).result()

    def tick(self) -> None:
        """Let the mapper hand out more of the maps begun (:meth:`ragmem.runtime.parallel.ForkPool.tick`)."""
        getattr(self.mapper, "tick", lambda: None)()

    def start(self, fn, items, *args) -> None:
        """Begin ``map(fn, items, *args)`` on the workers now, for a later :meth:`map` to collect: the
        families' text-heavy maps run while this process computes the others (no-op without a
        mapper that can start work)."""
        if hasattr(self.mapper, "submit"):
            self.started[(fn, args)] = (items, self._begin(fn, items, args))

    def _begin(self, fn, items, args):
        mapper = self.mapper or SERIAL
        begun = self.early.begun(fn, args) if self.early is not None else ()
        todo = [item for item in items if item not in begun] if begun else items
        pending = mapper.submit(fn, todo, *args) if hasattr(mapper, "submit") else \
            Pending(lambda: mapper.map(fn, todo, *args))
        if not begun:
            return pending

        def merged() -> list:
            rest, known = iter(pending.result()), self.early.results(fn, args)
            out = [known[item] if item in begun else next(rest) for item in items]
            self.early.forget(fn, args)
            return out
        return Pending(merged)

    def rows(self, table: pd.DataFrame | list) -> list:
        """The table's rows (:func:`rows`), read once per table for all the families; a list is
        rows already (a batch's, while the agent runs: :func:`ragmem.metrics.start_metrics`)."""
        if isinstance(table, list):
            return table
        if not self._rows or self._rows[0] is not table:
            self._rows[:] = [table, rows(table)]
        return self._rows[1]

    def generation_scorer(self):
        return scorer_for(self.generation.tokenizer, self.generation.bleu_tokenize)


def rows(table: pd.DataFrame) -> list:
    """``list(table.itertuples(index=False))``, the same values, read column by column: a string
    column (Arrow-backed in pandas 3) gives its values with one ``tolist()``, ten times faster than
    iterating it cell by cell as ``itertuples`` does (0.1 s per pass over a 10k-row table)."""
    columns = [table[c].tolist() if isinstance(table[c].dtype, pd.StringDtype) else table[c] for c in table.columns]
    row = collections.namedtuple("Pandas", list(table.columns), rename=True)  # type: ignore[misc]
    return list(map(row._make, zip(*columns)))


def failed(row) -> bool:
    """Whether the agent call of a table row failed (its example is left out of quality metrics)."""
    return isinstance(row.error, str)


def scored_mask(table: pd.DataFrame) -> pd.Series:
    """Rows whose agent call succeeded."""
    return table["error"].isna() if "error" in table else pd.Series(True, index=table.index)


# ---- aggregators: what the bootstrap resamples ---------------------------------------------------

@dataclass
class Aggregator:
    """A metric rebuilt from per-example statistics.

    - ``sum``: the metric is a function of column sums of ``data`` (n, m) (means: ``[value, 1]``;
      ratios: ``[numerator, denominator]``; corpus BLEU/chrF: sacrebleu's sufficient statistics);
    - ``apply``: the metric is a function of the values ``data`` (n,) (latency percentiles).
    """

    kind: str                                # "sum" or "apply"
    data: np.ndarray                         # (n, m) for sum; (n,) with NaN for missing for apply
    reduce: Callable[[np.ndarray], float | None]
    vreduce: Callable[[np.ndarray], np.ndarray] | None = None  # the same on many rows at once (NaN = undefined)
    # two-stage resampling (sum kind): resum(rng, counts (R, n)) -> the column sums (R, m) of R resamples
    # whose examples' own data is drawn again (judge samples: ragmem.metrics.reliability.majority_aggregator)
    resum: Callable[[np.random.Generator, np.ndarray], np.ndarray] | None = None
    # apply kind, weighted resamples (the Poisson bootstrap): wreduce(WeightedSample of the sorted
    # measured values) -> the statistic of each resample's multiset (R,) (ragmem.stats.intervals.resample_all)
    wreduce: Callable[["WeightedSample"], np.ndarray] | None = None
    # sum kind, a metric with an interval of its own (pass_rate_ppi's): interval(column sums) -> (low, high)
    interval: Callable[[np.ndarray], tuple[float, float] | None] | None = None
    # sum kind, an aggregate that is 0/0 as a whole (precision): its undefined count (0 or 1) from the sums
    undefined: Callable[[np.ndarray], int] | None = None
    # apply kind, a percentile (0.95 for a p95): its interval is the order statistics' (distribution-free:
    # ragmem.stats.intervals.quantile_interval) rather than the bootstrap's, unless clusters are resampled
    quantile: float | None = None

    def value(self) -> float | None:
        value = self.reduce(self.data.sum(axis=0) if self.kind == "sum" else self.data)
        return None if value is None else float(value)

    def reduce_many(self, rows: np.ndarray) -> np.ndarray:
        """The metric on each row of ``rows``: column sums (sum kind) or gathered values (apply kind)."""
        if self.vreduce is not None:
            return self.vreduce(rows)
        return self.reduce_many_ragged(rows)

    def reduce_many_ragged(self, rows) -> np.ndarray:
        """The metric of each of ``rows``, which may differ in length (NaN = undefined)."""
        values = [self.reduce(row) for row in rows]
        return np.array([np.nan if v is None else v for v in values], dtype=float)

    def with_data(self, data: np.ndarray) -> "Aggregator":
        return Aggregator(self.kind, data, self.reduce, self.vreduce, wreduce=self.wreduce, interval=self.interval,
                          undefined=self.undefined, quantile=self.quantile)


def _mean(s):
    return None if s[1] == 0 else s[0] / s[1]


def _vmean(sums):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sums[:, 1] == 0, np.nan, sums[:, 0] / sums[:, 1])


def mean_aggregator(values: pd.Series, ok: pd.Series | None = None) -> Aggregator:
    """The mean of a per-example column over its defined values (rows not ``ok`` left out).

    >>> agg = mean_aggregator(pd.Series([1.0, None, 0.0, 0.5]))
    >>> agg.value(), agg.data.tolist()
    (0.5, [[1.0, 1.0], [0.0, 0.0], [0.0, 1.0], [0.5, 1.0]])
    """
    if ok is not None:
        values = values.where(ok, None)
    v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    defined = ~np.isnan(v)
    return Aggregator("sum", np.column_stack([np.where(defined, v, 0.0), defined.astype(float)]), _mean, _vmean)


def ratio_aggregator(numerator, denominator, zero_division: float, support=None) -> Aggregator:
    """``Σ numerator / Σ denominator``; a zero denominator takes ``zero_division`` (NaN: undefined).
    With ``support`` (per example, 1 where it counts: a classified example), null when no example
    counts at all (nothing to divide is not ``zero_division``).

    >>> ratio_aggregator([1, 0, 1], [1, 1, 1], zero_division=0.0).value()
    0.6666666666666666
    >>> ratio_aggregator([0, 0], [0, 0], zero_division=1.0).value()
    1.0
    >>> ratio_aggregator([0, 0], [0, 0], zero_division=1.0, support=[0, 0]).value() is None
    True
    """
    def reduce(s):
        if len(s) > 2 and s[2] == 0:
            return None
        if s[1] == 0:
            return None if math.isnan(zero_division) else zero_division
        return s[0] / s[1]

    def vreduce(sums):
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(sums[:, 1] == 0, zero_division, sums[:, 0] / sums[:, 1])
        return np.where(sums[:, 2] == 0, np.nan, out) if sums.shape[1] > 2 else out

    columns = [numerator, denominator] + ([] if support is None else [support])
    data = np.column_stack([np.asarray(c, dtype=float) for c in columns])
    return Aggregator("sum", data, reduce, vreduce, undefined=lambda s: int(s[1] == 0))


def apply_aggregator(values: np.ndarray, fn: Callable[[np.ndarray], float],
                     vfn: Callable[[np.ndarray], np.ndarray], wfn=None) -> Aggregator:
    """``fn`` of the defined values (NaN = not measured); ``vfn`` the same along axis 1; ``wfn`` the
    same on weighted resamples (see :attr:`Aggregator.wreduce`)."""
    def reduce(v):
        kept = v[~np.isnan(v)]
        return None if kept.size == 0 else float(fn(kept))

    def vreduce(rows):
        if np.isnan(rows).all(axis=1).any():  # a resample without any measured value: per row
            return np.array([np.nan if np.isnan(r).all() else vfn(r[None, :])[0] for r in rows])
        return vfn(rows)

    return Aggregator("apply", values, reduce, vreduce, wreduce=wfn)


def _lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """numpy's linear interpolation of ``percentile`` (the same rounding: from the nearer end)."""
    diff = b - a
    return np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)


class WeightedSample:
    """Weighted resamples of sorted ``values``: resample ``r`` is the multiset holding ``values[i]``
    ``weights[r, i]`` times (the Poisson bootstrap's), never built. The running totals are computed
    once and shared by every statistic of the same values (latency's five)."""

    def __init__(self, values: np.ndarray, weights: np.ndarray):
        self.values, self.weights = values, weights
        self.cum = np.cumsum(weights, axis=1)
        self.total = self.cum[:, -1] if values.size else np.zeros(len(weights))
        self._flat: Any = None
        self._offsets: Any = None

    def at(self, positions: np.ndarray) -> np.ndarray:
        """The index into ``values`` of each row's element at 0-based ``positions`` of its multiset:
        one binary search over all rows at once (row ``r``'s totals shifted by ``r`` times more
        than any total, so that the rows laid end to end stay sorted)."""
        rows, n = self.cum.shape
        if self._flat is None:
            self._offsets = np.arange(rows) * (float(self.total.max(initial=0)) + 1)
            self._flat = (self.cum + self._offsets[:, None]).ravel()
        found = np.searchsorted(self._flat, positions + self._offsets, side="right") - np.arange(rows) * n
        return np.clip(found, 0, max(n - 1, 0))


def weighted_percentile(q: float):
    """``np.percentile(multiset, q)`` (linear) of each resample of a :class:`WeightedSample`; NaN
    for an empty one.

    >>> weighted_percentile(50)(WeightedSample(np.array([1.0, 2.0, 10.0]), np.array([[2., 0, 1], [0, 0, 0]])))
    array([ 1., nan])
    """
    def wfn(sample: WeightedSample) -> np.ndarray:
        if not sample.values.size:
            return np.full(len(sample.total), np.nan)
        last = np.maximum(sample.total - 1, 0)
        position = q / 100 * last
        low = np.floor(position)
        out = _lerp(sample.values[sample.at(low)], sample.values[sample.at(np.minimum(low + 1, last))], position - low)
        return np.where(sample.total > 0, out, np.nan)
    return wfn


def weighted_mean(sample: WeightedSample) -> np.ndarray:
    """The mean of each resample of a :class:`WeightedSample`; NaN when empty."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sample.total > 0, (sample.weights @ sample.values) / sample.total, np.nan)


def weighted_max(sample: WeightedSample) -> np.ndarray:
    """The largest value of each resample of a :class:`WeightedSample`; NaN when empty."""
    if not sample.values.size:
        return np.full(len(sample.total), np.nan)
    return np.where(sample.total > 0, sample.values[sample.at(np.maximum(sample.total - 1, 0))], np.nan)


# ---- the family declaration -----------------------------------------------------------------------

def _no_aggregators(table, names, zero_division, scorer) -> dict[str, Aggregator]:
    return {}


@dataclass(frozen=True)
class Family:
    """One family of metrics, declared in its module.

    - ``names``: which names are the family's (:class:`ragmem.metrics.names.Names`, declared in the
      pandas-free :mod:`ragmem.metrics.names`);
    - ``compute(table, ctx, wanted)``: the aggregates to keep (the ``wanted`` names plus the
      family's companions: counts, per-stage latencies), per-example columns, undefined counts;
    - ``aggregators(table, names, zero_division, scorer)``: per-example sufficient statistics of
      the ``names`` the table supports (what intervals and paired tests resample);
    - ``start(table, ctx, wanted)`` (optional): begins the family's text-heavy maps on the workers
      (:meth:`MetricContext.start`) before any family computes;
    - ``context_keywords``: whether ``compute`` may ask the keyword sets of the contexts' texts; a
      run has them computed at once on the workers (``ragmem.run.pipeline.prime_keywords``) only when
      a family it runs says so (a family that asks without saying gets the same sets, computed in
      this process as it asks).
    """

    names: Names
    compute: Callable[[pd.DataFrame, MetricContext, Sequence[str]], MetricResult]
    aggregators: Callable[..., dict[str, Aggregator]] = _no_aggregators
    start: Callable[[pd.DataFrame, MetricContext, Sequence[str]], None] | None = None  # begins its maps early
    context_keywords: bool = False

    @property
    def name(self) -> str:
        return self.names.family

    def selects(self, name: str) -> bool:
        return self.names.selects(name)

    def owns(self, name: str) -> bool:
        return self.names.owns(name)

    def expand(self, name: str, ks: Sequence[int]) -> list[str] | None:
        """The output names a selected name stands for, or ``None`` when it is not this family's."""
        return self.names.expand(name, ks)
