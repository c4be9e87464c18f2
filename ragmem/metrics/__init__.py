"""Metric registry: which metric names exist and the one function that computes a selection of them.

Metrics read the per-example results table (one row per example, see :mod:`ragmem.pipeline`) and
return aggregates, per-example columns and counts of undefined cases. A family computes several
names from the same statistics; the config key ``metrics`` selects names, and only the families
that produce a selected name run. Ranking metrics are selected per family with ``{family}_at_k``
(expanded to every k in ``ranking.k``) or one at a time (``ndcg_at_10``). Later metrics plug in by
adding a family here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import pandas as pd

from ragmem.errors import ConfigError
from ragmem.metrics import classification, generation, latency, rag, ranking
from ragmem.metrics.base import MetricResult, nanmean
from ragmem.metrics.coverage import coverage
from ragmem.schema import CONTEXT_SOURCES, STAGES
from ragmem.text.keywords import KeywordExtractor

RELEVANCE_MODES = ("auto", "ids", "keyword")


@dataclass(frozen=True)
class MetricContext:
    """Settings metrics need besides the table."""

    keywords: KeywordExtractor
    zero_division: float = 0.0
    ks: tuple[int, ...] = ranking.DEFAULT_KS
    relevance: str = "auto"            # where gold relevance comes from (see README: Ranking)
    keyword_threshold: float = 0.5     # a context is relevant when it holds > this share of K(reference)
    generation: Any = field(default_factory=lambda: _section("GenerationSettings"))  # generation.*
    rag: Any = field(default_factory=lambda: _section("RagMetricSettings"))           # rag_metrics.*
    llm: Any = None        # ragmem.llm.JudgeClient: LLM-based metrics (else their offline modes)
    embedder: Any = None   # ragmem.llm.EmbeddingClient

    def generation_scorer(self) -> "generation.GenerationScorer":
        return generation.scorer_for(self.generation.tokenizer, self.generation.bleu_tokenize)


def _section(name: str):
    """The default settings of a section (imported late: the schema imports this registry)."""
    from ragmem import settings

    return getattr(settings, name)()


def _scored(table: pd.DataFrame) -> pd.DataFrame:
    """Rows whose agent call succeeded."""
    return table[table["error"].isna()]


def _classification(table: pd.DataFrame, ctx: MetricContext) -> MetricResult:
    if table["label"].isna().all():
        return MetricResult(values={n: None for n in classification.NAMES},
                            notes=["no labels in the dataset: accuracy/precision/recall/f1 not computed"])
    rows = _scored(table)
    rows = rows[rows["label"].notna() & rows["verdict"].notna()]
    result = classification.classification_metrics(rows["label"].astype(int).tolist(),
                                                   rows["verdict"].astype(int).tolist(),
                                                   ctx.zero_division)
    result.values["n_classified"] = float(len(rows))
    return result


def _coverage(table: pd.DataFrame, ctx: MetricContext) -> MetricResult:
    K = ctx.keywords
    answer_cov: list[float | None] = []
    reference_cov: list[float | None] = []
    undefined = {"avg_coverage": 0, "reference_coverage": 0}
    for row in table.itertuples(index=False):
        if isinstance(row.error, str):
            answer_cov.append(None)
            reference_cov.append(None)
            continue
        context_kw = K.union(c["text"] for c in row.contexts)
        value, was_undefined = coverage(K(row.generated_answer or ""), context_kw, ctx.zero_division)
        answer_cov.append(value)
        undefined["avg_coverage"] += was_undefined
        value, was_undefined = coverage(K(row.reference_answer or ""), context_kw, ctx.zero_division)
        reference_cov.append(value)
        undefined["reference_coverage"] += was_undefined
    return MetricResult(
        values={"avg_coverage": nanmean(answer_cov), "reference_coverage": nanmean(reference_cov)},
        columns={"coverage": answer_cov, "reference_coverage": reference_cov},
        undefined=undefined)


def _latency(table: pd.DataFrame, ctx: MetricContext) -> MetricResult:
    measured = table["latency_s"].dropna()
    values: dict[str, float | None] = dict(latency.latency_stats(measured))
    values["n_latency_measured"] = float(len(measured))
    stage_columns = [c for c in table.columns if c.startswith("stage_") and c.endswith("_s")]
    ordered = sorted(stage_columns, key=lambda c: (STAGES.index(c[6:-2]) if c[6:-2] in STAGES else 99, c))
    for column in ordered:
        values.update(latency.latency_stats(table[column].dropna(), prefix=column[6:-2]))
    notes = [] if len(measured) else ["latency not measured (replayed data without latency_ms)"]
    return MetricResult(values=values, notes=notes)


def _gold_id(context_id: str | None, relevance: dict[str, float]) -> str | None:
    """A context matches a gold id exactly, or by its document part (``doc-3#c2`` -> ``doc-3``)."""
    if context_id is None or context_id in relevance:
        return context_id
    base = context_id.split("#", 1)[0]
    return base if base in relevance else context_id


def example_relevance(row, ctx: MetricContext) -> tuple[list[str | None], dict[str, float]] | None:
    """Ranked ids and gold relevance of one example, from gold ids or (offline) keyword overlap."""
    gold = row.gold_relevance if isinstance(row.gold_relevance, dict) else None
    if gold is not None and ctx.relevance in ("auto", "ids"):
        return [_gold_id(c.get("id"), gold) for c in row.contexts], gold
    if ctx.relevance == "ids":
        return None
    # Offline: a retrieved context is relevant when it holds more than keyword_threshold of the
    # reference's keywords; R counts relevant contexts among those retrieved.
    reference = ctx.keywords(row.reference_answer or "")
    if not reference:
        return None
    ids, rel = [], {}
    for i, c in enumerate(row.contexts):
        key = c.get("id") or f"#{i}"
        ids.append(key)
        share = len(ctx.keywords(c["text"]) & reference) / len(reference)
        if share > ctx.keyword_threshold and key not in rel:
            rel[key] = 1.0
    return ids, rel


def _ranking(table: pd.DataFrame, ctx: MetricContext) -> MetricResult:
    names = ranking.metric_names(ctx.ks)
    columns: dict[str, list[float | None]] = {n: [] for n in names}
    no_relevant = 0
    used_ids = used_keyword = 0
    for row in table.itertuples(index=False):
        found = None if isinstance(row.error, str) else example_relevance(row, ctx)
        values = None
        if found is not None:
            values = ranking.query_metrics(found[0], found[1], ctx.ks)
            if isinstance(row.gold_relevance, dict) and ctx.relevance != "keyword":
                used_ids += 1
            else:
                used_keyword += 1
        if values is None and not isinstance(row.error, str):
            no_relevant += 1
        for name in names:
            columns[name].append(None if values is None else values[name])
    aggregates = {name: nanmean(col) for name, col in columns.items()}
    aggregates["n_ranking_no_relevant"] = float(no_relevant)
    notes = []
    if used_keyword:
        notes.append(f"ranking: {used_keyword} example(s) without gold ids judged relevant by keyword overlap "
                     f"> {ctx.keyword_threshold} with the reference (approximation)")
    if no_relevant:
        notes.append(f"ranking: {no_relevant} example(s) with no relevant context left out of the means")
    return MetricResult(values=aggregates, columns=columns, notes=notes)


def _generation(table: pd.DataFrame, ctx: MetricContext) -> MetricResult:
    scorer = ctx.generation_scorer()
    columns: dict[str, list] = {n: [] for n in (*generation.NAMES, "bleu_stats", "chrf_stats")}
    for row in table.itertuples(index=False):
        if isinstance(row.error, str):
            for values in columns.values():
                values.append(None)
            continue
        for name, value in scorer.score(row.generated_answer or "", row.reference_answer or "").items():
            columns[name].append(value)
    values: dict[str, float | None] = {n: nanmean(columns[n]) for n in generation.NAMES}
    bleu_stats = [s for s in columns["bleu_stats"] if s is not None]
    chrf_stats = [s for s in columns["chrf_stats"] if s is not None]
    values["bleu"] = scorer.bleu_from_stats([sum(c) for c in zip(*bleu_stats)]) if bleu_stats else None
    values["chrf"] = scorer.chrf_from_stats([sum(c) for c in zip(*chrf_stats)]) if chrf_stats else None
    values["bleu_sentence_mean"] = nanmean(columns["bleu"])
    values["chrf_sentence_mean"] = nanmean(columns["chrf"])
    return MetricResult(values=values, columns=columns)


PER_SOURCE_KINDS = ("context_share", "coverage", "reference_coverage", "hit_rate", "answer_source_share")
PER_SOURCE_NAMES = tuple(f"{kind}_{source}" for source in CONTEXT_SOURCES for kind in PER_SOURCE_KINDS)


def _per_source(table: pd.DataFrame, ctx: MetricContext) -> MetricResult:
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
    for row in table.itertuples(index=False):
        if isinstance(row.error, str):
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
                hits[s].append(float(any(gold.get(_gold_id(c.get("id"), gold) or "", 0) > 0 for c in by_source[s])))
    if not any_source:
        return MetricResult(values={n: None for n in PER_SOURCE_NAMES},
                            notes=["per-source metrics: no context carries a source"])
    values: dict[str, float | None] = {}
    for s in CONTEXT_SOURCES:
        values[f"context_share_{s}"] = totals[s] / n_contexts if n_contexts else None
        values[f"coverage_{s}"] = nanmean(cov[s])
        values[f"reference_coverage_{s}"] = nanmean(ref_cov[s])
        values[f"hit_rate_{s}"] = nanmean(hits[s])
        values[f"answer_source_share_{s}"] = nanmean(only[s])
    return MetricResult(values=values)


def _rag(table: pd.DataFrame, ctx: MetricContext, wanted: Sequence[str] = rag.NAMES) -> MetricResult:
    computer = rag.RagMetrics(ctx, ctx.rag)
    merged = MetricResult(values={})
    for name in rag.NAMES:
        if name in wanted:
            result = getattr(computer, name)(table)
            merged.values.update(result.values)
            merged.columns.update(result.columns)
            merged.undefined.update(result.undefined)
    merged.notes.extend(computer.notes)
    return merged


@dataclass(frozen=True)
class Family:
    names: Callable[[MetricContext], Sequence[str]]
    compute: Callable[[pd.DataFrame, MetricContext], MetricResult]
    companions: tuple[str, ...] = ()


FAMILIES: tuple[Family, ...] = (
    Family(lambda ctx: classification.NAMES, _classification,
           ("confusion_tp", "confusion_fn", "confusion_fp", "confusion_tn", "n_classified")),
    Family(lambda ctx: ("avg_coverage", "reference_coverage"), _coverage),
    Family(lambda ctx: latency.NAMES, _latency, ("n_latency_measured",)),
    Family(lambda ctx: ranking.metric_names(ctx.ks), _ranking, ("n_ranking_no_relevant",)),
    Family(lambda ctx: generation.NAMES, _generation, ("bleu_sentence_mean", "chrf_sentence_mean")),
    Family(lambda ctx: rag.NAMES, _rag),
    Family(lambda ctx: PER_SOURCE_NAMES, _per_source),
)

BASE_METRICS: tuple[str, ...] = (*classification.NAMES, "avg_coverage", "reference_coverage", *latency.NAMES,
                                 *generation.NAMES, *rag.NAMES)
RANKING_SELECTORS: tuple[str, ...] = tuple(f"{f}_at_k" for f in ranking.RANKING_FAMILIES)
#: The default selection: every metric (ranking families at every k of ``ranking.k``, per-source).
DEFAULT_METRICS: tuple[str, ...] = (*BASE_METRICS, *RANKING_SELECTORS, "per_source")
_AT_K = re.compile(r"^(%s)_at_(\d+)$" % "|".join(ranking.RANKING_FAMILIES))


def expand_selection(names: Sequence[str], ks: Sequence[int] = ranking.DEFAULT_KS) -> list[str]:
    """Selector names -> output names; unknown names are a ConfigError listing what exists."""
    out: list[str] = []
    unknown = []
    for name in names:
        if name in BASE_METRICS:
            out.append(name)
        elif name in RANKING_SELECTORS:
            out.extend(f"{name[:-5]}_at_{k}" for k in ks)
        elif name == "per_source":
            out.extend(PER_SOURCE_NAMES)
        elif name in PER_SOURCE_NAMES:
            out.append(name)
        elif _AT_K.match(name):
            out.append(name)
        else:
            unknown.append(name)
    if unknown:
        raise ConfigError(f"metrics: unknown metric(s) {', '.join(map(repr, unknown))}; available: "
                          f"{', '.join(BASE_METRICS + RANKING_SELECTORS)}, per_source (or e.g. ndcg_at_10, "
                          f"coverage_memory_long)")
    return list(dict.fromkeys(out))


def compute_metrics(table: pd.DataFrame, selected: Sequence[str], ctx: MetricContext) -> MetricResult:
    """Run the families that produce a selected name; keep the selected names plus their
    companions (confusion counts, per-stage latencies, measured counts)."""
    wanted_all = expand_selection(selected, ctx.ks)
    if "gold_relevance" not in table:
        table = table.assign(gold_relevance=None)
    merged = MetricResult(values={})
    # ranking metrics at a k outside ranking.k are computed too when named one by one
    extra_ks = tuple(sorted({int(m.group(2)) for n in wanted_all if (m := _AT_K.match(n))} - set(ctx.ks)))
    ranking_ctx = replace(ctx, ks=tuple(ctx.ks) + extra_ks) if extra_ks else ctx
    for family in FAMILIES:
        fctx = ranking_ctx if family.compute is _ranking else ctx
        names = set(family.names(fctx))
        wanted = [n for n in wanted_all if n in names]
        if not wanted:
            continue
        result = family.compute(table, fctx, wanted) if family.compute is _rag else family.compute(table, fctx)
        dropped = names - set(wanted)
        stage_suffix = {latency._SUFFIXES[n] for n in dropped} if family.compute is _latency else set()
        for name, value in result.values.items():
            if name in dropped and family.compute is not _rag or ("_latency_" in name and name.rsplit("_", 1)[-1] in stage_suffix):
                continue
            merged.values[name] = value
        merged.columns.update({k: v for k, v in result.columns.items()
                               if k not in dropped or k in ("bleu", "chrf")})
        merged.undefined.update({k: v for k, v in result.undefined.items() if k in wanted})
        merged.notes.extend(result.notes)
    return merged
