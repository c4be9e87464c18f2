"""Per-source metrics: what each context source (``rag``, ``memory_short``, ``memory_long``)
brought, for runs whose contexts carry a ``source``. Aggregates only: no per-example columns; their
per-example statistics give their intervals. Selected one by one (``coverage_memory_long``) or all
with ``per_source``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ragmem.metrics import names, needs
from ragmem.metrics.base import Aggregator, failed, Family, MetricResult, unless_note
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

    Each is a ratio of sums of per-example statistics ``[numerator, denominator, has a source]``
    (:attr:`MetricResult.statistics`: intervals, and chunks that add up); null, with a note, when
    no context of the run carries a source.
    """
    K = ctx.keywords
    stats: dict[str, list[Any]] = {f"{kind}_{s}": [] for s in CONTEXT_SOURCES for kind in KINDS}
    for row in ctx.rows(table):
        if failed(row):
            for column in stats.values():
                column.append((0.0, 0.0, 0.0))
            continue
        by_source = {s: [c for c in row.contexts if c.get("source") == s] for s in CONTEXT_SOURCES}
        has = float(any(by_source.values()))
        answer, reference = K(row.generated_answer or ""), K(needs.reference(row))
        kws = {s: K.union(c["text"] for c in cs) for s, cs in by_source.items()}
        gold = row.gold_relevance if isinstance(row.gold_relevance, dict) else None
        for s in CONTEXT_SOURCES:
            others = set().union(*(kws[t] for t in CONTEXT_SOURCES if t != s)) if answer else set()
            stats[f"context_share_{s}"].append((len(by_source[s]), len(row.contexts), has))
            stats[f"coverage_{s}"].append((len(kws[s] & answer) / len(answer), 1.0, has) if answer else (0.0, 0.0, has))
            stats[f"answer_source_share_{s}"].append(
                (len((kws[s] - others) & answer) / len(answer), 1.0, has) if answer else (0.0, 0.0, has))
            stats[f"reference_coverage_{s}"].append(
                (len(kws[s] & reference) / len(reference), 1.0, has) if reference else (0.0, 0.0, has))
            stats[f"hit_rate_{s}"].append(
                (float(any(is_gold(c, gold) for c in by_source[s])), 1.0, has) if gold else (0.0, 0.0, has))
    aggs = {name: Aggregator("sum", np.array(rows, dtype=float).reshape(-1, 3), _share, _vshare)
            for name, rows in stats.items() if name in wanted}
    values = {name: agg.value() for name, agg in aggs.items()}
    anywhere = any(row[2] for row in stats[f"context_share_{CONTEXT_SOURCES[0]}"])
    notes: list[str] = [] if anywhere else [unless_note("per-source metrics: no context carries a source", *aggs)]
    return MetricResult(values=values, notes=notes, statistics=aggs)


def _share(s) -> float | None:
    """``Σ numerator / Σ denominator``; null when no context of the run carries a source, or 0/0."""
    return None if s[2] == 0 or s[1] == 0 else s[0] / s[1]


def _vshare(sums: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((sums[:, 2] == 0) | (sums[:, 1] == 0), np.nan, sums[:, 0] / sums[:, 1])


FAMILY = Family(names.PER_SOURCE, compute, context_keywords=True)
