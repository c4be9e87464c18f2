"""Paired comparisons of two runs' per-example tables, chunk by chunk: what ``ragmem compare``, a
``max_regression`` gate against its baseline and a sweep's ties report (``B - A``, its
paired-bootstrap interval and randomization p-value), without holding either table whole.

A table is a frame, or anything with ``ids()`` and ``chunks(rows)`` (a run's Parquet file:
:class:`ragmem.tracking.files.ParquetTable`). The examples the runs share are found by their keys
(:func:`ragmem.schema.example_keys`: 8 bytes an example, the one thing held per example). Each
run's shared rows are then summed alone, ``CHUNK_ROWS`` at a time
(:class:`ragmem.stats.run_statistics.RunStatistics`): the Poisson bootstrap's weights and the randomization
test's swaps are functions of an example's key, so resample r's difference is
``reduce(sum_i w_ri b_i) - reduce(sum_i w_ri a_i)`` and permutation p moves ``S_p B - S_p A``
from one run to the other, with no alignment of the two tables. Only apply-kind values (latency
percentiles) are kept per example, and aligned by key.

The classic bootstrap (drawn by position over the aligned tables) and a two-stage aggregator
(``judge.samples`` > 1, whose second stage draws by position) read both tables whole, in A's order.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pandas as pd

from ragmem.metrics.base import MetricResult
from ragmem.metrics.generation import CORPUS  # (corpus BLEU and chrF: rebuilt with the run's scorer)
from ragmem.schema import example_keys
from ragmem.stats import clusters
from ragmem.stats import intervals as stats
from ragmem.stats.run_statistics import RunStatistics

__all__ = ["CHUNK_ROWS", "chunks_of", "frame_of", "paired_rows", "unpaired_rows"]

#: rows of a table summed at a time
CHUNK_ROWS = 10_000


def chunks_of(table: Any, rows: int = CHUNK_ROWS) -> Iterator[pd.DataFrame]:
    """A table ``rows`` at a time (a frame sliced, a file read)."""
    if isinstance(table, pd.DataFrame):
        for start in range(0, len(table), rows):
            yield table.iloc[start:start + rows].reset_index(drop=True)
    else:
        yield from table.chunks(rows)


def frame_of(table: Any) -> pd.DataFrame:
    """A table whole (a frame as it is; a file read at once)."""
    return table if isinstance(table, pd.DataFrame) else table.frame()


def _clustered(table: Any) -> bool:
    """Whether a run's table names each example's cluster (``stats.cluster_by``)."""
    names = table.columns if isinstance(table, pd.DataFrame) else table.column_names()
    return clusters.COLUMN in names


def ids_of(table: Any) -> list:
    """A per-example table's ``id`` column: a frame's, or a table on disk's (read alone)."""
    return table["id"].tolist() if isinstance(table, pd.DataFrame) else table.ids()


def paired_rows(a: Any, b: Any, names: list[str], zero_division: float, scorer,
                resamples: int = 1000, seed: int = 0, confidence: float = 0.95,
                bootstrap: str = "poisson", rows: int = CHUNK_ROWS,
                permutations: int | None = None) -> tuple[list[dict[str, Any]], int]:
    """``B - A`` for every metric of ``names`` the per-example tables support, on the examples they
    share (matched by ``id``): rows of :meth:`ragmem.stats.intervals.PairedResult.to_dict`, and the number
    shared. Without a ``scorer`` corpus BLEU/chrF are left out. ``bootstrap``: how the examples are
    resampled (``stats.bootstrap``; ``poisson``: summed ``rows`` at a time); ``permutations``: of the
    randomization test (default ``resamples``; a family corrected for multiplicity needs more,
    :func:`ragmem.stats.multiplicity.permutations_for`)."""
    permutations = resamples if permutations is None else permutations
    # both runs clustered: whole clusters weighed and swapped together; else (one of them ran without
    # stats.cluster_by) the examples alone for both, the same weights on either side
    alone = not (_clustered(a) and _clustered(b))
    keys_a, keys_b = example_keys(ids_of(a)), example_keys(ids_of(b))
    in_b = np.isin(keys_a, keys_b)
    n_shared = int(in_b.sum())
    if not n_shared:
        return [], 0
    if scorer is None:
        names = [n for n in names if n not in CORPUS]
    if bootstrap == "poisson":
        shared = np.unique(keys_a[in_b])
        first = _summed(a, keys_a, shared, names, zero_division, scorer, resamples, seed, confidence, rows, permutations,
                        alone)
        second = None if first is None else _summed(b, keys_b, shared, names, zero_division, scorer, resamples, seed,
                                                    confidence, rows, permutations, alone)  # (not once A is two-stage)
        if first is not None and second is not None:
            return [first.paired(second, n).to_dict() for n in names if n in first and n in second], n_shared
    first, second = frame_of(a), frame_of(b)
    if alone:
        first, second = (t.drop(columns=clusters.COLUMN, errors="ignore") for t in (first, second))
    return _whole(first, second, names, zero_division, scorer, resamples, seed, confidence, bootstrap, permutations)


def unpaired_rows(a: Any, b: Any, names: list[str], zero_division: float, scorer, resamples: int = 1000,
                  seed: int = 0, confidence: float = 0.95, rows: int = CHUNK_ROWS) -> list[dict[str, Any]]:
    """``B - A`` for every summed metric of ``names``, when the runs hold different examples (two
    windows of production traffic): each run's every example summed alone, its bootstrap drawn on
    its own (:meth:`ragmem.stats.run_statistics.RunStatistics.unpaired`): rows ``{metric, a, b,
    diff, ci_low, ci_high, p_value, n_a, n_b}``. The examples alone are resampled (clusters, which
    may span both windows, are not); a percentile on each run's own resamples of its values."""
    if scorer is None:
        names = [n for n in names if n not in CORPUS]
    summed = []
    for table, drawn_with in ((a, seed), (b, seed + 1)):  # another seed: the two draws independent
        keys = example_keys(ids_of(table))
        statistics = _summed(table, keys, np.unique(keys), names, zero_division, scorer, resamples, drawn_with,
                             confidence, rows, 0, alone=True)
        if statistics is None:  # a two-stage aggregator (judge.samples > 1): not compared
            return []
        summed.append(statistics)
    rows_out = (summed[0].unpaired(summed[1], n) for n in names if n in summed[0] and n in summed[1])
    return [row for row in rows_out if row is not None]


def _summed(table: Any, keys: np.ndarray, shared: np.ndarray, names: list[str], zero_division: float, scorer,
            resamples: int, seed: int, confidence: float, rows: int, permutations: int,
            alone: bool = False) -> RunStatistics | None:
    """One run's statistics over the ``shared`` examples, chunk by chunk (``keys``: of its rows, in
    the order the chunks come); ``None`` when an aggregator is two-stage (it cannot be summed by chunk).
    ``alone``: its clusters ignored (the other run has none)."""
    summed, start = RunStatistics(resamples, seed, confidence, permutations=permutations), 0
    for chunk in chunks_of(table, rows):
        mine = keys[start:start + len(chunk)]
        start += len(chunk)
        keep = np.isin(mine, shared)
        if not keep.all():
            chunk, mine = chunk[keep].reset_index(drop=True), mine[keep]
        if chunk.empty:
            continue
        if alone and clusters.COLUMN in chunk:
            chunk = chunk.drop(columns=clusters.COLUMN)
        aggs = stats.aggregators(chunk, names, zero_division, scorer)
        if not all(stats.by_chunk(agg) for agg in aggs.values()):  # two-stage: read whole
            return None
        summed.merge(RunStatistics.of_chunk(chunk, MetricResult({}), aggs, resamples, seed, confidence, permutations, mine))
    return summed


def _whole(a: pd.DataFrame, b: pd.DataFrame, names: list[str], zero_division: float, scorer, resamples: int,
           seed: int, confidence: float, bootstrap: str, permutations: int) -> tuple[list[dict[str, Any]], int]:
    """:func:`paired_rows` on the two tables whole, aligned in A's order."""
    ids_b = set(b["id"])
    shared = [i for i in a["id"] if i in ids_b]
    a = a.set_index("id").loc[shared].reset_index()
    b = b.set_index("id").loc[shared].reset_index()
    aggs_a, aggs_b = stats.aggregators(a, names, zero_division, scorer), stats.aggregators(b, names, zero_division, scorer)
    keys = clusters.table_keys(a) if bootstrap == "poisson" else None
    groups = clusters.resampled(len(np.unique(keys))) if keys is not None and clusters.COLUMN in a else None
    keys = stats.example_keys(a["id"]) if keys is not None and groups is None else keys
    out = [stats.paired(n, aggs_a[n], aggs_b[n], resamples, seed, confidence, keys, permutations, groups).to_dict()
           for n in names if n in aggs_a and n in aggs_b]
    return out, len(shared)
