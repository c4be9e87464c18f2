"""LLM-based RAG metrics, each with an offline approximation (``judge.type: keyword``).

Per example each metric gives a value (a column of the same name) or a failure with its reason
(``{metric}_error``); the aggregate is the mean over the examples that were scored, failures are
counted in ``{metric}_failures`` (never scored 0), and ``{metric}_pass_rate`` is the share of scored
examples with a value >= ``rag_metrics.threshold`` (default 0.5).

- ``answer_correctness``: the judge's verdict (1 correct / 0 wrong). With ``judge.type: llm`` an LLM
  decides from the question, reference and answer; offline it is the keyword-overlap verdict. With
  the LLM judge, ``keyword_llm_agreement`` is the share of examples where the keyword verdict agrees
  with it. (The judge's agreement with labels, ``judge_label_kappa``, is measured for every judge:
  :mod:`ragmem.metrics.reliability`.)
- ``contextual_precision`` (as eval-lib's ContextualPrecisionMetric): one relevance verdict ``v_k``
  per retrieved chunk (the top ``rag_metrics.contextual_precision_top_k``, default all);
  ``Σ_k (precision@k · v_k) / (relevant chunks in the top K)``, 0 when none is relevant.
  [relevant, irrelevant, relevant] -> (1 + 2/3) / 2 = 0.8333. Verdicts come from the dataset's gold
  ids when it has them (no LLM), else from the LLM, else (offline) keyword overlap with the reference
  above ``ranking.keyword_threshold``.
- ``context_relevance`` (reference-free, as RAGAS's context relevance and DeepEval's contextual
  relevancy): the share of the retrieved chunks (the top ``rag_metrics.contextual_precision_top_k``)
  relevant to the question, one verdict per chunk: the LLM's (the passage helps answer the question),
  or offline: the chunk holds more than ``ranking.keyword_threshold`` of the query's keywords (a query
  without keywords is undefined: ``zero_division``).
- ``answer_relevancy``: as RAGAS (questions generated from the answer, their embeddings' cosine with
  the question's) with an embeddings endpoint, as DeepEval (the share of the answer's statements that
  address the question) with the chat model alone; offline the cosine of query and answer. See
  :mod:`ragmem.metrics.relevancy`.
- ``context_entity_recall`` (as RAGAS): ``|E(contexts) ∩ E(reference)| / |E(reference)|`` over
  entities normalised by NFKC, case and whitespace. Extractor: the LLM, or offline (jieba part of
  speech for Chinese person/place/organisation/other proper noun/numeral/time, capitalised spans and
  numbers for English).
- ``faithfulness``: claims of the answer (LLM, or offline: its sentences), each judged supported by
  the contexts (LLM verdict, or offline: the contexts hold at least half of its keywords); supported /
  all claims. An answer without claims is undefined (``zero_division``).

An example without the fields a metric needs (declared in :mod:`ragmem.metrics.names`, read by
:mod:`ragmem.metrics.needs`) is not asked about: null for that metric, counted as not scored with the
field it lacks, never 0.
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

import pandas as pd

from ragmem.metrics import names, needs
from ragmem.metrics.base import Family, mean_aggregator, MetricResult, nanmean, scored_mask
from ragmem.metrics import relevancy
from ragmem.metrics.itemized import share_said_yes
from ragmem.metrics.ranking import is_gold, keyword_relevant
from ragmem.metrics.reliability import item_votes, items_aggregator, majority_aggregator
from ragmem.prompts.templates import numbered, said_yes
from ragmem.text.entities import OfflineEntities, normalize_entity, shared_entities  # noqa: F401  (also here)
from ragmem.text.keywords import keyword_cosines

NAMES = names.RAG.selectable
_SENTENCES = re.compile(r"[^。！？!?.;；\n]+[。！？!?.;；]?")


def contextual_precision(verdicts: Sequence[int]) -> float:
    """``Σ_k (precision@k · v_k) / (number of relevant)``; 0 when nothing is relevant.

    >>> round(contextual_precision([1, 0, 1]), 4)
    0.8333
    """
    relevant = sum(verdicts)
    if relevant == 0:
        return 0.0
    total, hits = 0.0, 0
    for k, v in enumerate(verdicts, 1):
        if v:
            hits += 1
            total += hits / k
    return total / relevant


def entity_recall(context_entities: set[str], reference_entities: set[str]) -> float | None:
    if not reference_entities:
        return None
    return len(context_entities & reference_entities) / len(reference_entities)


def _lists() -> tuple[list[float | None], list[str | None]]:
    return [], []


def _put(values: list[float | None], errors: list[str | None], value: float | None, error: str | None = None) -> None:
    """One example's value (``None``: not scored) and, when it failed, why."""
    values.append(value)
    errors.append(error)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCES.findall(text or "") if s.strip(" 。.!?！？;；")]


class RagMetrics:
    """Computes the selected RAG metrics for a results table, batching every LLM request."""

    def __init__(self, ctx, settings):
        self.ctx = ctx
        self._rows_of = None
        self.llm = ctx.llm
        self.embedder = ctx.embedder
        self.threshold = settings.threshold
        self.top_k = settings.contextual_precision_top_k
        self.n_questions = settings.relevancy_questions
        self.relevancy = settings.relevancy
        self.notes: list[str] = []

    # -- helpers -----------------------------------------------------------------------------
    def _ask(self, requests):
        return self.llm.run(requests) if requests else []

    def _finish(self, name: str, values: list[float | None], errors: list[str | None], undefined: int = 0,
                votes: list | None = None) -> MetricResult:
        scored = [v for v in values if v is not None and not math.isnan(v)]
        failures = sum(e is not None for e in errors)
        out = {name: nanmean(values), f"{name}_failures": float(failures),
               f"{name}_pass_rate": (sum(v >= self.threshold for v in scored) / len(scored)) if scored else None}
        columns: dict[str, list[Any]] = {name: values, f"{name}_error": errors}
        if votes is not None and any(v for v in votes):  # judge.samples > 1: [yes, samples] per item
            columns[f"{name}_votes"] = votes
        passed = [None if v is None or math.isnan(v) else float(v >= self.threshold) for v in values]
        return MetricResult(values=out, columns=columns, undefined={name: undefined},
                            statistics={f"{name}_pass_rate": mean_aggregator(pd.Series(passed, dtype=float))})

    def _rows(self, table: pd.DataFrame, metric: str | None = None):
        """The rows ``metric`` is computed on: ``None`` for a failed agent call and for an example that
        lacks a field the metric needs (:mod:`ragmem.metrics.needs`)."""
        if self._rows_of is None or self._rows_of[0] is not table:  # once per table, not per metric
            self._rows_of = (table, _rows(table, self.ctx))
        if metric is None:
            return self._rows_of[1]
        return [None if row is None or needs.lacks(row, metric) else row for row in self._rows_of[1]]

    # -- metrics -----------------------------------------------------------------------------
    def answer_correctness(self, table: pd.DataFrame) -> MetricResult:
        every = self.ctx.rows(table)  # (a reference-free verdict is pass_rate's, not correctness against a reference)
        values = [None if isinstance(r.error, str) or pd.isna(r.verdict) or needs.lacks(r, "answer_correctness")
                  else float(r.verdict) for r in every]
        errors = [r.judge_error if isinstance(r.judge_error, str) else None for r in every]
        result = self._finish("answer_correctness", values, errors)
        if "keyword_verdict" in table:
            agree = pd.Series([None if pd.isna(r.keyword_verdict) or pd.isna(r.verdict)
                               else float(int(r.keyword_verdict) == int(r.verdict)) for r in every], dtype=float)
            if agree.notna().any():
                result.values["keyword_llm_agreement"] = float(agree.sum() / agree.notna().sum())
                result.statistics["keyword_llm_agreement"] = mean_aggregator(agree)
        return result

    def contextual_precision(self, table: pd.DataFrame) -> MetricResult:
        rows = self._rows(table, "contextual_precision")  # (with contexts, and gold ids or a reference)
        plan: list[Any] = []
        requests: list[tuple[str, dict[str, str]]] = []
        for row in rows:
            if row is None:
                plan.append(None)
                continue
            contexts = list(row.contexts)[: self.top_k] if self.top_k else list(row.contexts)
            gold = row.gold_relevance if isinstance(row.gold_relevance, dict) else None
            if gold is not None:
                plan.append([int(is_gold(c, gold)) for c in contexts])
            elif self.llm is not None:
                start = len(requests)
                requests += [("chunk_relevance", {"question": row.query, "reference": needs.reference(row),
                                                  "context": c["text"]}) for c in contexts]
                plan.append(("llm", start, len(contexts)))
            else:
                K = self.ctx.keywords
                ref = K(needs.reference(row))
                plan.append([int(keyword_relevant(K, c["text"], ref, self.ctx.keyword_threshold)) for c in contexts])
        return self._chunk_scores("contextual_precision", plan, self._ask(requests), contextual_precision)

    def context_relevance(self, table: pd.DataFrame) -> MetricResult:
        rows = self._rows(table, "context_relevance")  # (with contexts: no reference needed)
        plan: list[Any] = []
        requests: list[tuple[str, dict[str, str]]] = []
        for row in rows:
            contexts = [] if row is None else list(row.contexts)[: self.top_k] if self.top_k else list(row.contexts)
            if row is None:
                plan.append(None)
            elif self.llm is not None:
                start = len(requests)
                requests += [("context_relevance", {"question": row.query, "context": c["text"]}) for c in contexts]
                plan.append(("llm", start, len(contexts)))
            else:
                K = self.ctx.keywords
                query = K(row.query)
                plan.append([int(keyword_relevant(K, c["text"], query, self.ctx.keyword_threshold)) for c in contexts]
                            if query else "undefined")  # (a query without keywords: nothing to match)
        return self._chunk_scores("context_relevance", plan, self._ask(requests), lambda v: sum(v) / len(v))

    def _chunk_scores(self, name: str, plan: list, answers: list, score) -> MetricResult:
        """``score(verdicts)`` per example from its chunks' verdicts: given (a list), the LLM's
        (``("llm", start, count)`` into ``answers``), none (``None``: not computed) or ``"undefined"``."""
        values, errors = _lists()
        votes: list[Any] = []
        undefined = 0
        for item in plan:
            if item is None or item == "undefined":
                undefined += item == "undefined"
                _put(values, errors, None if item is None else self.ctx.zero_division)
                votes.append(None)
                continue
            if isinstance(item, tuple):
                _, start, count = item
                got = answers[start:start + count]
                failed = [r.error for r in got if r.error]
                if failed:
                    _put(values, errors, None, failed[0])
                    votes.append(None)
                    continue
                item = [int(said_yes(r.value)) for r in got]
                votes.append(item_votes(got, item))
            else:
                votes.append(None)
            _put(values, errors, score(item))
        return self._finish(name, values, errors, undefined, votes=votes)

    def answer_relevancy(self, table: pd.DataFrame) -> MetricResult:
        return relevancy.Relevancy(self, self.relevancy).score(self._rows(table))

    def _embed(self, texts):
        return self.embedder.embed(texts)

    def context_entity_recall(self, table: pd.DataFrame) -> MetricResult:
        rows = self._rows(table, "context_entity_recall")
        values, errors = _lists()
        undefined = 0
        if self.llm is None:  # how many of each reference's entities, and how many of those the contexts hold
            K = self.ctx.keywords
            counts = iter(self.ctx.map(shared_entities, _entity_items(rows), K.tokenizer_name, K.stopword_specs))
            for row in rows:
                if row is None:
                    _put(values, errors, None)
                    continue
                wanted, found = next(counts)
                undefined += not wanted
                _put(values, errors, found / wanted if wanted else self.ctx.zero_division)
            return self._finish("context_entity_recall", values, errors, undefined)
        unique = _entity_texts(rows)
        entities: dict[str, tuple[str, ...] | str] = {}  # a text's distinct entities, or why they are missing
        for text, result in zip(unique, self._ask([("entities", {"text": t}) for t in unique])):
            entities[text] = result.error or tuple({normalize_entity(e) for e in result.value["entities"]})
        for row in rows:
            if row is None:
                _put(values, errors, None)
                continue
            parts = [entities[needs.reference(row)]] + [entities[c["text"]] for c in row.contexts]
            failed = [p for p in parts if isinstance(p, str)]
            if failed:
                _put(values, errors, None, failed[0])
                continue
            context_entities = set().union(*parts[1:]) if len(parts) > 1 else set()
            value = entity_recall(context_entities, set(parts[0]))  # (failures left above)
            if value is None:
                undefined += 1
                value = self.ctx.zero_division
            _put(values, errors, value)
        return self._finish("context_entity_recall", values, errors, undefined)

    def faithfulness(self, table: pd.DataFrame) -> MetricResult:
        rows = self._rows(table, "faithfulness")
        values, errors = _lists()
        undefined = 0
        if self.llm is None:
            K = self.ctx.keywords
            for row in rows:
                if row is None:
                    _put(values, errors, None)
                    continue
                claims = _sentences(row.generated_answer or "")
                context_kw = K.union(c["text"] for c in row.contexts)
                judged = [len(K(c) & context_kw) / len(K(c)) >= 0.5 for c in claims if K(c)]
                if not judged:
                    undefined += 1
                    _put(values, errors, self.ctx.zero_division)
                else:
                    _put(values, errors, sum(judged) / len(judged))
            return self._finish("faithfulness", values, errors, undefined)
        values, errors, undefined, votes = share_said_yes(
            self._ask, rows, lambda row: ("claims", {"question": row.query, "answer": row.generated_answer or ""}),
            "claims", lambda row: ("claim_support", {"contexts": numbered(c["text"] for c in row.contexts)
                                                     or "(no contexts)"}, "claim"), self.ctx.zero_division)
        return self._finish("faithfulness", values, errors, undefined, votes=votes)


def _rows(table: pd.DataFrame, ctx) -> list:
    """The table's rows, ``None`` for a failed agent call."""
    return [None if isinstance(r.error, str) else r for r in ctx.rows(table)]


def _entity_items(rows) -> list[tuple[str, tuple[str, ...]]]:
    """Each row's reference and context texts (offline entities are counted per row: :func:`shared_entities`)."""
    return [(needs.reference(row), tuple(c["text"] for c in row.contexts)) for row in rows if row is not None]


def _entity_texts(rows) -> list[str]:
    """Every distinct reference and context text of the rows (the LLM's entities are per text)."""
    texts: list[str] = []
    for row in rows:
        if row is not None:
            texts += [needs.reference(row)] + [c["text"] for c in row.contexts]
    return list(dict.fromkeys(texts))


def start(table: pd.DataFrame, ctx, wanted) -> None:
    """Begin the offline entities and answer_relevancy's cosines on the workers (see
    :meth:`MetricContext.start`); with an LLM (or embeddings) they are requests, not maps."""
    if ctx.llm is not None:
        return
    K, rows = ctx.keywords, _rows(table, ctx)
    if "context_entity_recall" in wanted:  # (the rows it is computed on: those with a reference and contexts)
        needing = [None if r is None or needs.lacks(r, "context_entity_recall") else r for r in rows]
        ctx.start(shared_entities, _entity_items(needing), K.tokenizer_name, K.stopword_specs)
    if "answer_relevancy" in wanted and ctx.embedder is None:
        ctx.start(keyword_cosines, relevancy.pairs(rows), K.tokenizer_name, K.stopword_specs)


def compute(table: pd.DataFrame, ctx, wanted) -> MetricResult:
    """The wanted RAG metrics, every LLM request of each batched (see :class:`RagMetrics`)."""
    computer = RagMetrics(ctx, ctx.rag)
    merged = MetricResult(values={})
    for name in NAMES:
        if name in wanted:
            result = getattr(computer, name)(table)
            merged.values.update(result.values)
            merged.columns.update(result.columns)
            merged.undefined.update(result.undefined)
            merged.statistics.update(result.statistics)
    merged.notes.extend(computer.notes)
    return merged


def aggregators(table: pd.DataFrame, names, zero_division: float, scorer=None) -> dict:
    ok = scored_mask(table)
    out = {n: mean_aggregator(table[n], ok) for n in names if n in table}
    if "answer_correctness" in out:  # the verdict of judge.samples: two-stage
        out["answer_correctness"] = majority_aggregator(table["answer_correctness"], ok, table)
    for name, kind in {"contextual_precision": "precision", "context_relevance": "mean", "faithfulness": "mean",
                       "answer_relevancy": "mean"}.items():
        if name in out and f"{name}_votes" in table:  # items of N samples each: two-stage
            out[name] = items_aggregator(table[name], ok, table[f"{name}_votes"], kind)
    return out


FAMILY = Family(names.RAG, compute, aggregators, start=start, context_keywords=True)
