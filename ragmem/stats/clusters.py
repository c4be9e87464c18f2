"""Examples that belong together, resampled together (``stats.cluster_by``).

The questions of one conversation, the turns of one session, the chunks of one document are not
independent: an agent that misreads a conversation misses several of its questions at once. A
bootstrap that resamples examples as if independent then gives intervals too narrow. With
``stats.cluster_by`` every example of a cluster gets the same Poisson weight and the same swap in a
randomization test: the weights and swaps are drawn from the *cluster's* key instead of the
example's (:func:`resampling_keys`), so the cluster bootstrap stays a function of ids, summed chunk
by chunk and paired by key exactly as the example bootstrap is
(:mod:`ragmem.stats.intervals`, :mod:`ragmem.stats.run_statistics`).

Few clusters: the percentile interval of a cluster bootstrap runs narrow when there are few
clusters (its variance is the plug-in one, biased by ``(G - 1) / G``, and its tails are normal where
a t with ``G - 1`` degrees of freedom is due). Clustered intervals are therefore *expanded
percentile* intervals (Hesterberg 2015, "What teachers should know about the bootstrap", section
4.3): the quantiles at ``Φ(sqrt(G / (G - 1)) · t_{G-1}(α / 2))`` and its complement instead of at
``α / 2`` (:func:`levels`). At 10 clusters a 95% interval reads the 0.86% and 99.14% quantiles; at
100 clusters 2.31% and 97.69%. ``benchmarks/bench_coverage.py`` measures what this buys: the share
of simulated datasets whose interval holds the truth.

Design effect (Kish): the variance of a metric's bootstrap with clusters over its variance with
examples resampled alone (:func:`design_effect`): 1 when clusters do not matter, the factor by
which they shrink the data's worth otherwise (n / deff examples' worth of independent data).
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

from ragmem.schema import example_keys

__all__ = ["COLUMN", "MIN_CLUSTERS", "design_effect", "describe", "levels", "resampled", "resampling_keys", "table_keys"]

#: fewer clusters than this are too few to resample: the examples are resampled alone, and the output
#: says so (2 clusters give a bootstrap of at most a few distinct values, 1 none at all)
MIN_CLUSTERS = 5
#: the per-example table's column of the clusters (present only when ``stats.cluster_by`` is set)
COLUMN = "cluster"
_PREFIX = "\x1fcluster:"  # a cluster's key never equals an example's of the same name


def resampling_keys(ids: Iterable[Any], clusters: Iterable[Any] | None = None) -> np.ndarray:
    """The 64-bit keys the Poisson weights and swaps are drawn from: each example's own
    (:func:`ragmem.schema.example_keys`), or with ``clusters`` its cluster's (an example without
    one, ``None`` or NaN, keeps its own: a cluster of one)."""
    if clusters is None:
        return example_keys(ids)
    named = [i if c is None or (isinstance(c, float) and math.isnan(c)) else _PREFIX + str(c)
             for i, c in zip(ids, clusters)]
    return example_keys(named)


def table_keys(table) -> np.ndarray:
    """:func:`resampling_keys` of a per-example table (clustered when it has a :data:`COLUMN`)."""
    clusters = table[COLUMN].tolist() if COLUMN in table else None
    return resampling_keys(table["id"].tolist(), clusters)


def levels(confidence: float, clusters: int | None = None) -> tuple[float, float]:
    """The quantile levels of a percentile interval at ``confidence``: ``α / 2`` and ``1 - α / 2``,
    or with ``clusters`` (G >= 2) the expanded ones, ``Φ(sqrt(G / (G - 1)) · t_{G-1}(α / 2))`` and
    its complement (see the module docstring).

    >>> [round(x, 4) for x in levels(0.95)], [round(x, 4) for x in levels(0.95, 10)]
    ([0.025, 0.975], [0.0086, 0.9914])
    """
    alpha = (1 - confidence) / 2
    if clusters is None or clusters < 2:
        return alpha, 1 - alpha
    from scipy.special import ndtr, stdtrit  # (scipy.special alone: scipy.stats takes 0.3 s to import)

    low = float(ndtr(math.sqrt(clusters / (clusters - 1)) * stdtrit(clusters - 1, alpha)))
    return low, 1 - low


def design_effect(clustered: np.ndarray, independent: np.ndarray) -> float | None:
    """Kish's design effect of one metric: the variance of its cluster-bootstrap values over that of
    its example-bootstrap values (NaN draws left out); ``None`` when either has fewer than two values
    or the examples' variance is 0."""
    clustered, independent = clustered[~np.isnan(clustered)], independent[~np.isnan(independent)]
    if clustered.size < 2 or independent.size < 2:
        return None
    base = float(np.var(independent, ddof=1))
    return None if base <= 0 else float(np.var(clustered, ddof=1)) / base


def resampled(n_clusters: int | None) -> int | None:
    """The number of clusters the intervals resample: ``n_clusters``, or ``None`` (the examples alone)
    when there are fewer than :data:`MIN_CLUSTERS`."""
    return n_clusters if n_clusters is not None and n_clusters >= MIN_CLUSTERS else None


def describe(by: str, n_clusters: int, n_examples: int, effects: dict[str, float | None]) -> dict[str, Any]:
    """What a clustered run reports (the summary JSON's ``clusters``): the field, how many clusters
    of how many examples, the method, and each metric's design effect (rounded to 3 decimals)."""
    method = ("cluster bootstrap, expanded percentile" if resampled(n_clusters) else
              f"examples resampled alone: fewer than {MIN_CLUSTERS} clusters are too few to resample, "
              f"and the intervals may be too narrow (by about the square root of the design effect)")
    return {"by": by, "n": int(n_clusters), "n_examples": int(n_examples), "method": method,
            "design_effect": {k: None if v is None else round(v, 3) for k, v in effects.items()}}


def line(clusters: dict[str, Any], shown: Iterable[str] = ()) -> str:
    """One line for the terminal: the unit of resampling, how many, and the design effects of the
    ``shown`` metrics (all when empty)."""
    effects = {k: v for k, v in clusters.get("design_effect", {}).items() if v is not None}
    wanted = [k for k in shown if k in effects] or list(effects)
    text = (f"intervals resample {clusters['n']} clusters ({clusters['by']}) of {clusters['n_examples']} examples, "
            f"{clusters['method']}" if resampled(clusters["n"]) else
            f"{clusters['n']} clusters ({clusters['by']}) of {clusters['n_examples']} examples: {clusters['method']}")
    if MIN_CLUSTERS <= clusters["n"] < 30:
        text += "; few clusters: intervals approximate (benchmarks/bench_coverage.py measures their coverage)"
    if wanted:
        text += "; design effect " + ", ".join(f"{k} {effects[k]:.2f}" for k in wanted[:6])
        if len(wanted) > 6:
            text += f" (+{len(wanted) - 6} in the summary JSON)"
    return text
