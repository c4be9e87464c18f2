"""Ranking metrics over the contexts in the order the agent returned them.

For one query with ranked context ids ``d_1..d_n`` and graded gold relevance ``rel(d)`` (0 = not
relevant; a list of relevant ids means grade 1), and ``R`` = the number of ids with ``rel > 0``:

- ``hit_rate_at_k``  = 1 if some ``d_i`` with ``i <= k`` is relevant, else 0
- ``mrr_at_k``       = ``1 / i`` for the first relevant ``d_i`` with ``i <= k``, else 0
- ``precision_at_k`` = (relevant among the top k) / k      (missing positions count as not relevant)
- ``recall_at_k``    = (relevant among the top k) / R
- ``map_at_k``       = ``Σ_{i<=k, d_i relevant} precision_at_i / R``   (trec_eval's ``map_cut``)
- ``ndcg_at_k``      = ``DCG@k / IDCG@k`` with linear gain, ``DCG@k = Σ_{i<=k} rel(d_i) / log2(i + 1)``
  and IDCG@k the DCG of the gold grades sorted best first (trec_eval's ``ndcg_cut``)

Rules (tested):
- a context id that repeats an earlier one keeps its position but counts as not relevant (the first
  occurrence counts; the agent did spend a slot on it);
- fewer than k contexts: the missing positions are not relevant (so precision divides by k);
- a query with no relevant id (R = 0) is undefined for every ranking metric: it is left out of the
  means and counted in ``n_ranking_no_relevant``;
- a context without an id never matches.

The kernels are plain Python on short lists: a query has tens of contexts, and the per-query loop is
not where time goes. They are checked against pytrec_eval (trec_eval) in the tests to 1e-9.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

RANKING_FAMILIES = ("hit_rate", "mrr", "ndcg", "recall", "precision", "map")
DEFAULT_KS = (1, 3, 5, 10)


def gains(ranked_ids: Sequence[str | None], relevance: Mapping[str, float]) -> list[float]:
    """Relevance grade of each ranked position, with repeats and unknown ids at 0."""
    seen: set[str] = set()
    out = []
    for doc in ranked_ids:
        if doc is None or doc in seen:
            out.append(0.0)
            continue
        seen.add(doc)
        out.append(float(relevance.get(doc, 0.0)))
    return out


def query_metrics(ranked_ids: Sequence[str | None], relevance: Mapping[str, float],
                  ks: Sequence[int] = DEFAULT_KS) -> dict[str, float] | None:
    """Every ranking metric at every k for one query; ``None`` when the query has no relevant id."""
    positive = sorted((g for g in relevance.values() if g > 0), reverse=True)
    n_relevant = len(positive)
    if n_relevant == 0:
        return None  # undefined: no relevant item to find
    g = gains(ranked_ids, relevance)
    out: dict[str, float] = {}
    for k in ks:
        top = g[:k]
        hits = [i for i, grade in enumerate(top, 1) if grade > 0]
        out[f"hit_rate_at_{k}"] = 1.0 if hits else 0.0
        out[f"mrr_at_{k}"] = 1.0 / hits[0] if hits else 0.0
        out[f"precision_at_{k}"] = len(hits) / k
        out[f"recall_at_{k}"] = len(hits) / n_relevant
        out[f"map_at_{k}"] = sum((j + 1) / i for j, i in enumerate(hits)) / n_relevant
        dcg = sum(grade / math.log2(i + 1) for i, grade in enumerate(top, 1) if grade > 0)
        idcg = sum(grade / math.log2(i + 1) for i, grade in enumerate(positive[:k], 1))
        out[f"ndcg_at_{k}"] = dcg / idcg
    return out


def metric_names(ks: Sequence[int] = DEFAULT_KS) -> list[str]:
    return [f"{family}_at_{k}" for family in RANKING_FAMILIES for k in ks]
