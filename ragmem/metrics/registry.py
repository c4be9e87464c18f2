"""Metric registry (``ragmem.metrics``): the families, which names exist, and the functions that compute a selection.

Metrics read the per-example results table (one row per example, see :mod:`ragmem.run.pipeline`) and
return aggregates, per-example columns and counts of undefined cases. Each family module declares
its names, its per-example computation and its aggregators in one place (``FAMILY``, see
:class:`ragmem.metrics.base.Family`); this module only iterates over them. The config key
``metrics`` selects names, and only the families that produce a selected name run. Ranking metrics
are selected per family with ``{family}_at_k`` (expanded to every k in ``ranking.k``) or one at a
time (``ndcg_at_10``).

A new family is its names in :mod:`ragmem.metrics.names`, one module ending with
``FAMILY = Family(names.X, ...)`` and one line in ``FAMILIES``.
"""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from ragmem.metrics import (classification, conversation, coverage, custom, generation, latency, per_source, rag,
                            ranking, reliability, rubric, verdicts)
from ragmem.metrics.base import Aggregator, Family, MetricContext, MetricResult, placed_note
from ragmem.metrics.names import DEFAULT_METRICS, RELEVANCE_MODES, expand_selection  # noqa: F401  (also here)
from ragmem.runtime.forking import release_freed_memory

# what this module exports is listed once, in ``ragmem.metrics.__all__`` (the package, which stays
# free of pandas and loads this module on first use); tests/metrics/test_catalogue.py holds them together

#: Every family, in the order their metrics are computed and reported (that of names.FAMILY_NAMES).
FAMILIES: tuple[Family, ...] = (
    verdicts.FAMILY,
    reliability.FAMILY,
    classification.FAMILY,
    coverage.FAMILY,
    latency.FAMILY,
    ranking.FAMILY,
    generation.FAMILY,
    rag.FAMILY,
    rubric.FAMILY,
    per_source.FAMILY,
    conversation.FAMILY,
    custom.FAMILY,
)


def _runs(selected: Sequence[str], ctx: MetricContext) -> list[tuple[Family, list[str]]]:
    """The families that produce a selected name, each with the names it keeps."""
    rubrics = [r.metric for r in ctx.rubrics]  # every rubric of the config, named in metrics or not
    own = [m.name for m in ctx.custom]         # every metric of one's own, too
    selected = [n for n in selected if n not in own]
    wanted_all = expand_selection(["pass_rate", *selected, *always_on(selected), *rubrics], ctx.ks)  # pass_rate first
    runs = [(family, [n for n in wanted_all if family.selects(n)] + (own if family is custom.FAMILY else []))
            for family in FAMILIES]
    return [(family, wanted) for family, wanted in runs if wanted]


def always_on(selected: Sequence[str]) -> list[str]:
    """The judge's reliability figures, measured on every run whatever the selection
    (answer_correctness_ppi when answer_correctness is selected)."""
    return [n for n in reliability.NAMES if n != "answer_correctness_ppi" or "answer_correctness" in selected]


def reads_context_keywords(selected: Sequence[str], ctx: MetricContext) -> bool:
    """Whether a family the selection runs asks the keyword sets of the contexts (its
    ``context_keywords``): else a run does not compute them (at 10k fresh examples with ``pass_rate``
    alone, 60,000 contexts' sets: 1.5 s of the run's 4)."""
    return any(family.context_keywords for family, _ in _runs(selected, ctx))


def start_metrics(rows: list, selected: Sequence[str], ctx: MetricContext) -> None:
    """Begin the families' text-heavy maps on ``rows`` (a batch's, while the agent answers the
    next; ``ctx.mapper`` is a :class:`ragmem.runtime.parallel.EarlyMaps`)."""
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
    results = {}
    for i in order:
        results[i] = runs[i][0].compute(table, ctx, runs[i][1])
        ctx.tick()  # free workers take the next parts of the maps begun
    release_freed_memory()  # what the maps' batches allocated and freed
    merged = MetricResult(values={})
    for i, (_, wanted) in enumerate(runs):
        result = results[i]
        merged.values.update(result.values)
        merged.columns.update(result.columns)
        merged.undefined.update({k: v for k, v in result.undefined.items() if k in wanted})
        merged.notes.extend(placed_note(note, (i, j)) for j, note in enumerate(result.notes))
        merged.ci.update(result.ci)  # a family's own intervals (pass_rate_ppi's), not the bootstrap's
        merged.statistics.update(result.statistics)
    return merged


def aggregators(table: pd.DataFrame, names: Sequence[str], zero_division: float = math.nan,
                scorer: "generation.GenerationScorer | None" = None) -> dict[str, Aggregator]:
    """Aggregators (per-example sufficient statistics) for the metric ``names`` that the table's
    columns support; ``scorer`` is the run's generation scorer (for corpus BLEU/chrF)."""
    out: dict[str, Aggregator] = {}
    for family in FAMILIES:
        owned = [n for n in names if family.owns(n)]
        if owned:
            out.update(family.aggregators(table, owned, zero_division, scorer))
    rest = [n for n in names if not any(family.owns(n) for family in FAMILIES)]
    if rest:  # metrics of one's own, known by their columns (a later compare has no config)
        out.update(custom.aggregators(table, rest, zero_division, scorer))
    return {n: out[n] for n in names if n in out}
