"""Keyword coverage: how much of one text's keywords another holds.

With ``K`` the keyword set (:class:`ragmem.text.keywords.KeywordExtractor`) and ``C`` the union of the
keywords of all retrieved contexts of an example:

- ``avg_coverage       = mean_i |C_i ∩ K(generated_i)| / |K(generated_i)|`` — how much of the
  answer is grounded in the context;
- ``reference_coverage = mean_i |C_i ∩ K(reference_i)| / |K(reference_i)|`` — how much of the
  reference answer the context holds (did retrieval and memory bring what was needed).

An example whose answer (reference) has no keyword is undefined: it takes ``zero_division``
(default ``nan``: null for the example and left out of the mean; 0 or 1 when set) and is counted in
``undefined_<metric>``.
Examples whose agent call failed are left out and counted in ``n_errors``; an example without
contexts has neither value, one without a reference answer no ``reference_coverage`` (null, counted
for the field it lacks: :mod:`ragmem.metrics.needs`).

>>> from ragmem.metrics.coverage import coverage
>>> coverage({"a", "b"}, {"a", "c"}, zero_division=0.0)
(0.5, False)
>>> coverage(set(), {"a"}, zero_division=0.0)
(0.0, True)
"""

from __future__ import annotations

from typing import AbstractSet

import pandas as pd

from ragmem.metrics import names, needs
from ragmem.metrics._division import divide
from ragmem.metrics.base import failed, Family, mean_aggregator, MetricResult, nanmean, scored_mask

NAMES = names.COVERAGE.selectable
COLUMNS = {m.name: str(m.column) for m in names.COVERAGE.metrics}  # per-example column (avg_coverage: coverage)


def coverage(target: AbstractSet[str], source: AbstractSet[str], zero_division: float) -> tuple[float, bool]:
    """``|source ∩ target| / |target|``: the share of ``target``'s keywords found in ``source``."""
    return divide(len(target & source), len(target), zero_division)


def compute(table: pd.DataFrame, ctx, wanted) -> MetricResult:
    """Answer and reference coverage per example (columns) and their means."""
    K = ctx.keywords
    columns: dict[str, list[float | None]] = {name: [] for name in NAMES}
    undefined = dict.fromkeys(NAMES, 0)
    for row in ctx.rows(table):
        if failed(row):
            for values in columns.values():
                values.append(None)
            continue
        context_kw = K.union(c["text"] for c in row.contexts)
        for name, text in (("avg_coverage", row.generated_answer), ("reference_coverage", row.reference_answer)):
            if needs.lacks(row, name):
                columns[name].append(None)
                continue
            value, was_undefined = coverage(K(text or ""), context_kw, ctx.zero_division)
            columns[name].append(value)
            undefined[name] += was_undefined
    return MetricResult(values={n: nanmean(columns[n]) for n in NAMES if n in wanted},
                        columns={COLUMNS[n]: columns[n] for n in NAMES if n in wanted}, undefined=undefined)


def aggregators(table: pd.DataFrame, names, zero_division: float, scorer=None) -> dict:
    ok = scored_mask(table)
    return {n: mean_aggregator(table[COLUMNS[n]], ok) for n in names if COLUMNS[n] in table}


FAMILY = Family(names.COVERAGE, compute, aggregators, context_keywords=True)
