"""``answer_relevancy``: how much of the answer addresses the question, reference-free. One metric,
four ways of scoring it, the one used named in the run's param ``rag_metrics.relevancy.signature``:

- ``questions`` (as RAGAS/Athina; an LLM judge and an embeddings endpoint): N questions
  (``rag_metrics.relevancy_questions``, 3) generated from the answer; the mean cosine similarity of
  each one's embedding with the original question's; 0 when every generation flags the answer
  noncommittal.
- ``statements`` (as DeepEval's AnswerRelevancyMetric; an LLM judge alone): the answer broken into
  the statements it makes (every fact, hedge, refusal or remark), each judged on whether it addresses
  the question; ``relevant statements / statements``. An answer without a statement (an empty one)
  is undefined (``zero_division``). "Paris is the capital of France. I love croissants." to "What is
  the capital of France?" -> 1 of 2 -> 0.5.
- ``embedding cosine`` (offline judge, an embeddings endpoint): the cosine of the query's and the
  answer's embeddings.
- ``keyword cosine`` (offline judge, nothing else): the cosine of the query's and the answer's
  keyword-count vectors (an approximation, said in the run's notes).

``rag_metrics.relevancy: auto`` (the default) takes ``questions`` when an embeddings endpoint is set
and ``statements`` when not, so ``judge.type: llm`` with one chat endpoint scores the default metrics.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ragmem.errors import ConfigError
from ragmem.metrics.base import MetricResult
from ragmem.metrics.itemized import share_said_yes
from ragmem.text.keywords import keyword_cosines

QUESTIONS, STATEMENTS = "questions", "statements"


def method(asks_llm: bool, has_embeddings: bool, setting: str = "auto") -> str:
    """The way ``answer_relevancy`` is scored (``rag_metrics.relevancy``, ``auto``: see the module).

    >>> method(True, False), method(True, True), method(False, True), method(False, False)
    ('statements', 'questions', 'embedding cosine', 'keyword cosine')
    """
    if not asks_llm:
        return "embedding cosine" if has_embeddings else "keyword cosine"
    if setting == "auto":
        return QUESTIONS if has_embeddings else STATEMENTS
    return setting


def embeds(cfg: Any) -> bool:
    """Whether the run ``cfg`` (a :class:`ragmem.config.loading.RunConfig`) embeds texts for
    answer_relevancy: the one condition under which the run, its dry run and its preflight build or
    probe the embeddings endpoint for it."""
    return bool(cfg.embeddings.model) and "answer_relevancy" in cfg.metrics and \
        method(cfg.judge.asks_llm, True, cfg.rag_metrics.relevancy) != STATEMENTS


def signature(asks_llm: bool, embeddings_model: str | None, setting: str, n_questions: int) -> str:
    """``rag_metrics.relevancy.signature``: the way and what it reads (``statements|judge``,
    ``questions:3|embeddings:bge-m3``, ``keyword cosine``)."""
    way = method(asks_llm, bool(embeddings_model), setting)
    if way == QUESTIONS:
        return f"{QUESTIONS}:{n_questions}|embeddings:{embeddings_model}"
    if way == STATEMENTS:
        return f"{STATEMENTS}|judge|as:deepeval"
    return way if way == "keyword cosine" else f"{way}|embeddings:{embeddings_model}"


def pairs(rows: Sequence[Any]) -> list[tuple[str, str]]:
    """(query, answer) of the rows scored (``None``: a failed agent call)."""
    return [(r.query, r.generated_answer or "") for r in rows if r is not None]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    denominator = np.linalg.norm(x) * np.linalg.norm(y)
    return float(x @ y / denominator) if denominator else 0.0


class Relevancy:
    """``answer_relevancy`` of the rows of one table, scored by the judge ``m`` reads from (its LLM,
    embeddings, keywords and ``_ask``/``_embed``/``_finish``: :class:`ragmem.metrics.rag.RagMetrics`)."""

    def __init__(self, m: Any, setting: str = "auto"):
        self.m, self.way = m, method(m.llm is not None, m.embedder is not None, setting)
        if self.way == QUESTIONS and m.embedder is None:  # (the config refuses it; a context made by hand too)
            raise ConfigError("rag_metrics.relevancy: questions compares the embeddings of generated questions: "
                              "it needs an embeddings endpoint (embeddings.model, embeddings.base_url)")
        self.values: list[float | None] = []
        self.errors: list[str | None] = []
        self.undefined = 0
        self.votes: list[Any] = []  # judge.samples > 1: [yes, samples] per statement (statements only)

    def _put(self, value: float | None, error: str | None = None) -> None:
        self.values.append(value)
        self.errors.append(error)

    def score(self, rows: Sequence[Any]) -> MetricResult:
        {QUESTIONS: self._questions, STATEMENTS: self._statements}.get(self.way, self._offline)(rows)
        if self.way == "keyword cosine":
            self.m.notes.append("answer_relevancy offline: keyword-count cosine of query and answer (approximation)")
        return self.m._finish("answer_relevancy", self.values, self.errors, self.undefined,
                              votes=self.votes if self.way == STATEMENTS else None)

    def _offline(self, rows: Sequence[Any]) -> None:
        m = self.m
        queries = [r.query if r is not None else "" for r in rows]
        answers = [(r.generated_answer or "") if r is not None else "" for r in rows]
        vectors = m._embed(queries + answers) if m.embedder is not None else None
        if vectors is None:  # token-count cosines, on the scoring workers
            K = m.ctx.keywords
            cosines = iter(m.ctx.map(keyword_cosines, pairs(rows), K.tokenizer_name, K.stopword_specs))
        for i, row in enumerate(rows):
            if row is None:
                self._put(None)
            elif vectors is not None:
                q, a = vectors[i], vectors[len(rows) + i]
                self._put(None, q.error or a.error) if q.error or a.error else self._put(cosine(q.value, a.value))
            else:
                self._put(next(cosines))

    def _statements(self, rows: Sequence[Any]) -> None:
        self.values, self.errors, self.undefined, self.votes = share_said_yes(
            self.m._ask, rows, lambda row: ("statements", {"answer": row.generated_answer or ""}), "statements",
            lambda row: ("statement_relevance", {"question": row.query}, "statement"), self.m.ctx.zero_division,
            skip_blank=True)

    def _questions(self, rows: Sequence[Any]) -> None:
        m, n = self.m, self.m.n_questions
        requests = [("question", {"answer": row.generated_answer or "", "variant": f"{v + 1} of {n}"})
                    for row in rows if row is not None for v in range(n)]
        generated = iter(m._ask(requests))
        per_row = [None if row is None else [next(generated) for _ in range(n)] for row in rows]
        texts = [t for row, got in zip(rows, per_row) if got is not None
                 for t in [row.query] + [g.value["question"] for g in got if not g.error]]
        vectors = dict(zip(texts, m._embed(texts))) if texts else {}
        for row, got in zip(rows, per_row):
            failed = [] if got is None else [g.error for g in got if g.error]
            if got is None or failed:
                self._put(None, failed[0] if failed else None)
            elif all(int(g.value["noncommittal"]) == 1 for g in got):
                self._put(0.0)
            else:
                q, embedded = vectors[row.query], [vectors[g.value["question"]] for g in got]
                bad = [e.error for e in [q, *embedded] if e.error]
                self._put(None, bad[0]) if bad else self._put(float(np.mean([cosine(q.value, e.value) for e in embedded])))

