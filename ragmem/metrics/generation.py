"""Generation metrics: the generated answer against the reference answer, right in Chinese.

Every score is on a 0-1 scale (sacrebleu's 0-100 divided by 100). Texts are scored whole: a
multi-sentence answer is one segment, never just its first sentence.

- ``bleu``: sacrebleu corpus BLEU over all examples (computed from the summed per-example
  sufficient statistics, so bootstrap intervals never re-tokenize); per example, sentence BLEU with
  effective order. Tokenizer ``generation.bleu_tokenize`` (default ``zh``: CJK characters split,
  other text by 13a, so mixed Chinese/English keeps both).
- ``chrf``: sacrebleu chrF (character 6-grams, beta 2), corpus and per example.
- ``bleu_1``: unigram BLEU as LoCoMo/mem0 report it (nltk ``sentence_bleu`` with weights (1,0,0,0)
  and smoothing method1, which for a single order never applies: nltk returns 0 when no unigram
  matches): ``BP * p1`` with ``p1 = clipped unigram matches / |hyp|`` and ``BP = 1`` if
  ``|hyp| > |ref|`` else ``exp(1 - |ref| / |hyp|)``; 0 for an empty hypothesis. Mean over examples.
- ``rouge_1``, ``rouge_2``, ``rouge_l``: rouge-score F-measures with a tokenizer that segments CJK
  with jieba (rouge-score's default tokenizer deletes every non-ASCII character: identical Chinese
  texts would score 0). Mean over examples.
- ``token_f1``, ``exact_match``: SQuAD-style: lowercase, punctuation and the articles a/an/the
  removed, CJK segmented; F1 over the token multisets (1 when both are empty, 0 when one is).

Tokens for bleu_1, ROUGE, token_f1 and exact_match: NFKC + lowercase, CJK runs segmented by the
configured tokenizer (``generation.tokenizer``, default jieba), other runs split into words and
numbers, punctuation dropped; stopwords are kept (they are part of an answer's wording).

An example without a reference answer (production traffic) has none of these scores: null, counted
as not scored for ``no reference answer`` (:mod:`ragmem.metrics.needs`), and left out of the corpus sums.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np
import pandas as pd

from ragmem.metrics import names, needs
from ragmem.metrics.base import Aggregator, failed, Family, mean_aggregator, MetricResult, nanmean, scored_mask
from ragmem.metrics.scorer import GenerationScorer, score_pairs, scorer_for  # noqa: F401  (also here)

NAMES = names.GENERATION.selectable
COMPANIONS = names.GENERATION_COMPANIONS
#: corpus scores: the statistics column and its width (sacrebleu: BLEU 2 + 2x4, chrF 3x6)
CORPUS = {"bleu": ("bleu_stats", 10), "chrf": ("chrf_stats", 18)}


def compute(table: pd.DataFrame, ctx, wanted) -> MetricResult:
    """Per-example scores (columns, with the BLEU/chrF statistics), the wanted means, and corpus
    BLEU/chrF from the summed statistics (their sentence means beside them)."""
    scorer = ctx.generation_scorer()
    columns: dict[str, list] = {n: [] for n in (*NAMES, "bleu_stats", "chrf_stats")}
    rows = ctx.rows(table)
    scores = iter(ctx.map(score_pairs, _pairs(rows), scorer.tokenizer.name, scorer.bleu_tokenize))
    for row in rows:
        if _left_out(row):
            for column in columns.values():
                column.append(None)
            continue
        for name, value in next(scores).items():
            columns[name].append(value)
    values: dict[str, float | None] = {n: nanmean(columns[n]) for n in NAMES if n in wanted}
    for name, (stats_column, _) in CORPUS.items():
        kept = [s for s in columns[stats_column] if s is not None]
        reduce = scorer.bleu_from_stats if name == "bleu" else scorer.chrf_from_stats
        if name in wanted:
            values[name] = reduce([sum(c) for c in zip(*kept)]) if kept else None
        values[f"{name}_sentence_mean"] = nanmean(columns[name])
    # sentence BLEU/chrF and the statistics stay as columns (the bootstrap resamples the statistics)
    keep = set(wanted) | set(CORPUS) | {column for column, _ in CORPUS.values()}
    means = {f"{n}_sentence_mean": mean_aggregator(pd.Series(columns[n], dtype=float)) for n in CORPUS}
    return MetricResult(values=values, columns={k: v for k, v in columns.items() if k in keep}, statistics=means)


def _left_out(row) -> bool:
    """A row with no scores: its agent call failed, or it has no reference answer."""
    return failed(row) or not needs.has(row, needs.REFERENCE)


def _pairs(rows) -> list[tuple[str, str]]:
    return [(row.generated_answer or "", row.reference_answer) for row in rows if not _left_out(row)]


def start(table: pd.DataFrame, ctx, wanted) -> None:
    """Begin scoring every pair on the workers (:meth:`MetricContext.start`)."""
    scorer = ctx.generation_scorer()
    ctx.start(score_pairs, _pairs(ctx.rows(table)), scorer.tokenizer.name, scorer.bleu_tokenize)


def _stats_matrix(values: pd.Series, width: int) -> np.ndarray:
    rows = []
    for v in values:
        if isinstance(v, str):  # a table read back from MLflow holds them as JSON text
            v = json.loads(v)
        rows.append(v if isinstance(v, (list, tuple)) and len(v) == width else [0] * width)
    return np.asarray(rows, dtype=float).reshape(len(rows), width)


def _from_stats(reduce: Callable[[Any], float]) -> Callable[[np.ndarray], float | None]:
    """A corpus score from summed statistics (none when no example was scored: 0 sentences)."""
    return lambda s: reduce(s) if s[0] > 0 else None


def aggregators(table: pd.DataFrame, names, zero_division: float, scorer=None) -> dict:
    """Corpus BLEU/chrF from summed sacrebleu statistics (with the run's scorer: its tokenizer);
    the other scores as means (over the examples with a reference answer)."""
    ok = scored_mask(table) & needs.holding(table, needs.REFERENCE)
    out = {}
    for name in names:
        if name in CORPUS and CORPUS[name][0] in table:
            if scorer is None:
                raise ValueError(f"{name}: the run's GenerationScorer is needed to rebuild it from statistics")
            column, width = CORPUS[name]
            reduce = scorer.bleu_from_stats if name == "bleu" else scorer.chrf_from_stats
            matrix = _stats_matrix(table[column].where(ok, None), width)
            out[name] = Aggregator("sum", matrix, _from_stats(reduce))
        elif name not in CORPUS and name in table:
            out[name] = mean_aggregator(table[name], ok)
    return out


FAMILY = Family(names.GENERATION, compute, aggregators, start=start)
