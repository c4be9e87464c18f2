"""Judges decide whether a generated answer is correct. Every judge has the same seam:

    judge.judge(items: list[JudgeItem]) -> list[Judgement]     (same order, one per item)
    judge.signature() -> str                                    (settings, for params and compare)

``judge.type`` selects one: ``keyword`` (default, offline, no LLM). An LLM judge plugs in here with
the same interface; a judge that cannot score an item returns a Judgement with ``verdict=None`` and
an ``error`` — never a silent 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ragmem.text.keywords import KeywordExtractor


@dataclass(frozen=True, slots=True)
class JudgeItem:
    query: str
    generated_answer: str
    reference_answer: str
    contexts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: int | None           # 1 correct, 0 wrong, None could not judge (see error)
    score: float | None = None    # the judge's continuous score, when it has one (keyword overlap)
    reason: str | None = None
    error: str | None = None
    keyword_verdict: int | None = None  # the offline verdict, kept beside an LLM verdict for agreement


class Judge(Protocol):
    name: str

    def judge(self, items: list[JudgeItem]) -> list[Judgement]: ...

    def signature(self) -> str: ...


def build_judge(settings, keywords: KeywordExtractor, zero_division: float, client=None) -> Judge:
    """The judge named by ``judge.type`` (:class:`ragmem.settings.JudgeSettings`, or a dict of
    them); ``llm`` needs the :class:`ragmem.llm.JudgeClient`."""
    from ragmem.judges.keyword import KeywordJudge
    from ragmem.config import as_section
    from ragmem.settings import JudgeSettings

    settings = as_section(JudgeSettings, settings, "judge")
    keyword = KeywordJudge(keywords, threshold=settings.threshold, zero_division=zero_division)
    if settings.type == "keyword":
        return keyword
    from ragmem.judges.llm import LLMJudge

    return LLMJudge(client, keyword)


def judging(cfg) -> tuple[KeywordExtractor, Judge, Any]:
    """The keyword extractor, the judge and its LLM client (``None`` offline) that a
    :class:`ragmem.config.RunConfig` asks for: what runs and memory benchmarks judge with."""
    keywords = KeywordExtractor(cfg.keywords.tokenizer, cfg.keywords.stopwords)
    client = None
    if cfg.judge.type == "llm":
        from ragmem.llm import JudgeClient

        client = JudgeClient(cfg.judge)
    return keywords, build_judge(cfg.judge, keywords, cfg.zero_division, client), client
