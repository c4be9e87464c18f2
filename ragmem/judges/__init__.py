"""Judges decide whether a generated answer is correct. Every judge has the same seam:

    judge.judge(items: list[JudgeItem]) -> list[Judgement]     (same order, one per item)
    judge.signature() -> str                                    (settings, for params and compare)

``judge.type`` selects one: ``keyword`` (default, offline, no LLM). An LLM judge plugs in here with
the same interface; a judge that cannot score an item returns a Judgement with ``verdict=None`` and
an ``error`` — never a silent 0.
"""

from __future__ import annotations

from typing import Any

from ragmem.clients.llm_client import JudgeClient
from ragmem.config.loading import as_section
from ragmem.config.settings import JudgeSettings
from ragmem.judges.base import Judge, JudgeItem, Judgement
from ragmem.judges.keyword import KeywordJudge
from ragmem.judges.llm import LLMJudge
from ragmem.text.keywords import KeywordExtractor

__all__ = ["Judge", "JudgeItem", "Judgement", "KeywordJudge", "LLMJudge", "build_judge", "judging"]


def build_judge(settings, keywords: KeywordExtractor, zero_division: float, client=None) -> Judge:
    """The judge named by ``judge.type`` (:class:`ragmem.config.settings.JudgeSettings`, or a dict of
    them); ``llm`` needs the :class:`ragmem.clients.llm_client.JudgeClient`."""
    settings = as_section(JudgeSettings, settings, "judge")
    keyword = KeywordJudge(keywords, threshold=settings.threshold, zero_division=zero_division)
    if settings.type == "keyword":
        return keyword
    return LLMJudge(client, keyword)


def judging(cfg) -> tuple[KeywordExtractor, Judge, Any]:
    """The keyword extractor, the judge and its LLM client (``None`` offline) that a
    :class:`ragmem.config.loading.RunConfig` asks for: what runs and memory benchmarks judge with."""
    keywords = KeywordExtractor(cfg.keywords.tokenizer, cfg.keywords.stopwords, cfg.keywords.cache_size)
    client = None
    if cfg.judge.type == "llm":
        client = JudgeClient(cfg.judge, rubrics=cfg.rubric_definitions())
    return keywords, build_judge(cfg.judge, keywords, cfg.zero_division, client), client
