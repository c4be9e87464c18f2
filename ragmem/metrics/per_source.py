"""Per-source metrics: what each context source (``rag``, ``memory_short``, ``memory_long``)
brought, for runs whose contexts carry a ``source``. Aggregates only (no per-example columns, so no
intervals). Selected one by one (``coverage_memory_long``) or all with ``per_source``.
"""

from __future__ import annotations

import pandas as pd

from ragmem.metrics import names
from ragmem.metrics.base import Family, MetricResult, failed, nanmean
from ragmem.metrics.ranking import is_gold
from ragmem.schema import CONTEXT_SOURCES

KINDS = names.PER_SOURCE_KINDS
NAMES = names.PER_SOURCE.selectable


def compute(table: pd.DataFrame, ctx, wanted) -> MetricResult:
    """Per context source (rag, memory_short, memory_long), over the examples whose call succeeded:

    - ``context_share_{s}``: share of all retrieved contexts that came from s;
    - ``coverage_{s}`` / ``reference_coverage_{s}``: mean share of the answer's / reference's keywords
      held by the contexts from s (0 for an example without contexts from s);
    - ``hit_rate_{s}``: share of examples with gold ids where a context from s is relevant;
    - ``answer_source_share_{s}``: mean share of the answer's keywords found only in s's contexts.
    """
    K = ctx.keywords
    totals = {s: 0 for s in CONTEXT_SOURCES}
    n_contexts = 0
    cov = {s: [] for s in CONTEXT_SOURCES}
    ref_cov = {s: [] for s in CONTEXT_SOURCES}
    only = {s: [] for s in CONTEXT_SOURCES}
    hits = {s: [] for s in CONTEXT_SOURCES}
    any_source = False
    for row in ctx.rows(table):
        if failed(row):
            continue
        by_source = {s: [c for c in row.contexts if c.get("source") == s] for s in CONTEXT_SOURCES}
        any_source |= any(by_source.values())
        n_contexts += len(row.contexts)
        answer, reference = K(row.generated_answer or ""), K(row.reference_answer or "")
        kws = {s: K.union(c["text"] for c in cs) for s, cs in by_source.items()}
        gold = row.gold_relevance if isinstance(row.gold_relevance, dict) else None
        for s in CONTEXT_SOURCES:
            totals[s] += len(by_source[s])
            if answer:
                cov[s].append(len(kws[s] & answer) / len(answer))
                others = set().union(*(kws[t] for t in CONTEXT_SOURCES if t != s))
                only[s].append(len((kws[s] - others) & answer) / len(answer))
            if reference:
                ref_cov[s].append(len(kws[s] & reference) / len(reference))
            if gold:
                hits[s].append(float(any(is_gold(c, gold) for c in by_source[s])))
    if not any_source:
        return MetricResult(values={n: None for n in NAMES if n in wanted},
                            notes=["per-source metrics: no context carries a source"])
    values: dict[str, float | None] = {}
    for s in CONTEXT_SOURCES:
        values[f"context_share_{s}"] = totals[s] / n_contexts if n_contexts else None
        values[f"coverage_{s}"] = nanmean(cov[s])
        values[f"reference_coverage_{s}"] = nanmean(ref_cov[s])
        values[f"hit_rate_{s}"] = nanmean(hits[s])
        values[f"answer_source_share_{s}"] = nanmean(only[s])
    return MetricResult(values={n: v for n, v in values.items() if n in wanted})


FAMILY = Family(names.PER_SOURCE, compute)
