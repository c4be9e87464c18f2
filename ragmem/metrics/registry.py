"""Metric registry (``ragmem.metrics``): the families, which names exist, and the functions that compute a selection.

Metrics read the per-example results table (one row per example, see :mod:`ragmem.pipeline`) and
return aggregates, per-example columns and counts of undefined cases. Each family module declares
its names, its per-example computation and its aggregators in one place (``FAMILY``, see
:class:`ragmem.metrics.base.Family`); this module only iterates over them. The config key
``metrics`` selects names, and only the families that produce a selected name run. Ranking metrics
are selected per family with ``{family}_at_k`` (expanded to every k in ``ranking.k``) or one at a
time (``ndcg_at_10``).

A new family is one module ending with ``FAMILY = Family(...)`` and one line in ``FAMILIES``.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from ragmem.errors import ConfigError
from ragmem.metrics import classification, coverage, generation, latency, per_source, rag, ranking, verdicts
from ragmem.metrics.base import Aggregator, Family, MetricContext, MetricResult

__all__ = ["FAMILIES", "DEFAULT_METRICS", "RELEVANCE_MODES", "MetricContext", "MetricResult", "aggregators",
           "compute_metrics", "expand_selection", "start_metrics"]

RELEVANCE_MODES = ("auto", "ids", "keyword")

#: Every family, in the order their metrics are computed and reported.
FAMILIES: tuple[Family, ...] = (
    verdicts.FAMILY,
    classification.FAMILY,
    coverage.FAMILY,
    latency.FAMILY,
    ranking.FAMILY,
    generation.FAMILY,
    rag.FAMILY,
    per_source.FAMILY,
)

#: The default selection: every metric (ranking families at every k of ``ranking.k``, per-source).
DEFAULT_METRICS: tuple[str, ...] = (
    *(n for f in FAMILIES if f is not per_source.FAMILY for n in f.selectable),
    *(s for f in FAMILIES for s in f.selectors),
)


def expand_selection(names: Sequence[str], ks: Sequence[int] = ranking.DEFAULT_KS) -> list[str]:
    """Selector names -> output names; unknown names are a ConfigError listing what exists.

    >>> expand_selection(["f1", "ndcg_at_k", "mrr_at_7", "f1"], ks=(1, 5))
    ['f1', 'ndcg_at_1', 'ndcg_at_5', 'mrr_at_7']
    """
    out: list[str] = []
    unknown = []
    for name in names:
        expanded = next((e for f in FAMILIES if (e := f.expand(name, ks)) is not None), None)
        if expanded is None:
            unknown.append(name)
        else:
            out.extend(expanded)
    if unknown:
        raise ConfigError(f"metrics: unknown metric(s) {', '.join(map(repr, unknown))}; available: "
                          f"{', '.join(DEFAULT_METRICS)} (or e.g. ndcg_at_10, coverage_memory_long)")
    return list(dict.fromkeys(out))


def _runs(selected: Sequence[str], ctx: MetricContext) -> list[tuple[Family, list[str]]]:
    """The families that produce a selected name, each with the names it keeps."""
    wanted_all = expand_selection(["pass_rate", *selected], ctx.ks)  # pass_rate always, first
    runs = [(family, [n for n in wanted_all if family.selects(n)]) for family in FAMILIES]
    return [(family, wanted) for family, wanted in runs if wanted]


def start_metrics(rows: list, selected: Sequence[str], ctx: MetricContext) -> None:
    """Begin the families' text-heavy maps on ``rows`` (a batch's, while the agent answers the
    next; ``ctx.mapper`` is a :class:`ragmem.parallel.EarlyMaps`)."""
    for family, wanted in _runs(selected, ctx):
        if family.start is not None:
            family.start(rows, ctx, wanted)


def compute_metrics(table: pd.DataFrame, selected: Sequence[str], ctx: MetricContext) -> MetricResult:
    """Run the families that produce a selected name; each keeps the selected names plus its
    companions (confusion counts, per-stage latencies, measured counts)."""
    if "gold_relevance" not in table:
        table = table.assign(gold_relevance=None)
    runs = _runs(selected, ctx)
    for family, wanted in runs:  # the text-heavy maps begin on the workers...
        if family.start is not None:
            family.start(table, ctx, wanted)
    # ...while this process computes the families that need none; results merge in FAMILIES order
    order = sorted(range(len(runs)), key=lambda i: runs[i][0].start is not None)
    results = {i: runs[i][0].compute(table, ctx, runs[i][1]) for i in order}
    merged = MetricResult(values={})
    for i, (family, wanted) in enumerate(runs):
        result = results[i]
        merged.values.update(result.values)
        merged.columns.update(result.columns)
        merged.undefined.update({k: v for k, v in result.undefined.items() if k in wanted})
        merged.notes.extend(result.notes)
    return merged


def aggregators(table: pd.DataFrame, names: Sequence[str], zero_division: float = 0.0,
                scorer: "generation.GenerationScorer | None" = None) -> dict[str, Aggregator]:
    """Aggregators (per-example sufficient statistics) for the metric ``names`` that the table's
    columns support; ``scorer`` is the run's generation scorer (for corpus BLEU/chrF)."""
    out: dict[str, Aggregator] = {}
    for family in FAMILIES:
        owned = [n for n in names if family.owns(n)]
        if owned:
            out.update(family.aggregators(table, owned, zero_division, scorer))
    return {n: out[n] for n in names if n in out}
