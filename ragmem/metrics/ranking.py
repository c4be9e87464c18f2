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

import pandas as pd

from ragmem.metrics import names, needs
from ragmem.metrics.base import counted_note, failed, Family, mean_aggregator, MetricResult, nanmean, scored_mask
from ragmem.metrics.names import DEFAULT_KS
from ragmem.text import plural

RANKING_FAMILIES = names.RANKING_FAMILIES
AT_K = names.AT_K


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
    """Every ranking metric at every k for one query; ``None`` when the query has no relevant id.

    >>> m = query_metrics(["d1", "d2", "d2", "d3"], {"d2": 1, "d3": 1}, ks=(1, 3))
    >>> m["hit_rate_at_1"], m["mrr_at_3"], m["precision_at_3"], m["recall_at_3"]
    (0.0, 0.5, 0.3333333333333333, 0.5)
    >>> query_metrics(["d1"], {}) is None   # no relevant id: undefined, left out of the means
    True
    """
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


def gold_id(context_id: str | None, relevance: Mapping[str, float]) -> str | None:
    """A context matches a gold id exactly, or by its document part (``doc-3#c2`` -> ``doc-3``).

    >>> gold_id("doc-3#c2", {"doc-3": 1.0}), gold_id("doc-4#c1", {"doc-3": 1.0})
    ('doc-3', 'doc-4#c1')
    """
    if context_id is None or context_id in relevance:
        return context_id
    base = context_id.split("#", 1)[0]
    return base if base in relevance else context_id


def is_gold(context: dict, relevance: Mapping[str, float]) -> bool:
    """Whether a context is relevant by the example's gold ids."""
    return relevance.get(gold_id(context.get("id"), relevance) or "", 0) > 0


def keyword_relevant(keywords, text: str, reference_keywords: set[str], threshold: float) -> bool:
    """Offline relevance: the context holds more than ``threshold`` of the reference's keywords."""
    return bool(reference_keywords) and len(keywords(text) & reference_keywords) / len(reference_keywords) > threshold


def example_relevance(row, ctx) -> tuple[list[str | None], dict[str, float]] | None:
    """Ranked ids and gold relevance of one example, from gold ids or (offline) keyword overlap."""
    gold = row.gold_relevance if isinstance(row.gold_relevance, dict) else None
    if gold is not None and ctx.relevance in ("auto", "ids"):
        return [gold_id(c.get("id"), gold) for c in row.contexts], gold
    if ctx.relevance == "ids":
        return None
    # R counts the relevant contexts among those retrieved
    reference = ctx.keywords(needs.reference(row))
    if not reference:
        return None
    ids, rel = [], {}
    for i, c in enumerate(row.contexts):
        key = c.get("id") or f"#{i}"
        ids.append(key)
        if key not in rel and keyword_relevant(ctx.keywords, c["text"], reference, ctx.keyword_threshold):
            rel[key] = 1.0
    return ids, rel


def compute(table: pd.DataFrame, ctx, wanted) -> MetricResult:
    """Every ranking metric at every k of ``ranking.k`` (and at a k named one by one) per example;
    the wanted means, and how many examples had no relevant context."""
    ks = tuple(sorted(set(ctx.ks) | {int(m.group(2)) for n in wanted if (m := AT_K.match(n))}))
    names = metric_names(ks)
    columns: dict[str, list[float | None]] = {n: [] for n in names}
    no_relevant = used_keyword = 0
    matched, unmatched = 0, []  # examples judged by gold ids: a retrieved id among them, or none with ids
    for row in ctx.rows(table):
        found = None if failed(row) else example_relevance(row, ctx)
        if found is not None and isinstance(row.gold_relevance, dict) and ctx.relevance != "keyword":
            retrieved = [c.get("id") for c in row.contexts if c.get("id")]
            if any(i in found[1] for i in found[0] if i is not None):
                matched += 1
            elif retrieved:
                unmatched.append((retrieved[0], next(iter(found[1]), "")))
        values = None if found is None else query_metrics(found[0], found[1], ks)
        if found is not None and not (isinstance(row.gold_relevance, dict) and ctx.relevance != "keyword"):
            used_keyword += 1
        if values is None and not failed(row):
            no_relevant += 1
        for name in names:
            columns[name].append(None if values is None else values[name])
    aggregates: dict[str, float | None] = {n: nanmean(columns[n]) for n in names if n in wanted}
    aggregates["n_ranking_no_relevant"] = float(no_relevant)
    notes: list[str] = []
    if used_keyword:
        threshold = ctx.keyword_threshold
        notes.append(counted_note("ranking.keyword", lambda n: f"ranking: {plural(n, 'example')} without gold ids judged "
                                  f"relevant by keyword overlap > {threshold} with the reference (approximation)", used_keyword))
    if unmatched and not matched:  # (ids that never meet: two schemes for one chunk, not a retriever at 0)
        retrieved, relevant = unmatched[0]
        notes.append(counted_note("ranking.ids_never_match", lambda n: (
            f"ranking: ids never matched: on {plural(n, 'example')} with gold ids, no retrieved context id is among the relevant ones "
            f"(retrieved {retrieved!r}, relevant {relevant!r}): if the retriever and the labels name chunks "
            f"differently, the ranking metrics are 0 for that alone; give relevant_context_ids as the retriever "
            f"names them"), len(unmatched)))
    if no_relevant:
        notes.append(counted_note("ranking.no_relevant", lambda n: f"ranking: {plural(n, 'example')} with no relevant "
                                  f"context left out of the means", no_relevant))
    return MetricResult(values=aggregates, columns={n: columns[n] for n in names if n in wanted}, notes=notes)


def aggregators(table: pd.DataFrame, names, zero_division: float, scorer=None) -> dict:
    ok = scored_mask(table)
    return {n: mean_aggregator(table[n], ok) for n in names if n in table}


FAMILY = Family(names.RANKING, compute, aggregators, context_keywords=True)
