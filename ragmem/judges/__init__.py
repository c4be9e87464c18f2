"""The judge, one concept: the verdict judges and the LLM client that every LLM task goes through
(verdicts, the RAG metrics, rubrics, generated questions, pairwise comparisons) are reached here, and
nothing else reads ``judge.type`` (:attr:`ragmem.config.settings.JudgeSettings.asks_llm` is the one
place it is read). Every verdict judge has the same seam:

    judge.judge(items: list[JudgeItem]) -> list[Judgement]     (same order, one per item)
    judge.signature() -> str                                    (settings, for params and compare)

``judge.type`` selects one: ``keyword`` (default, offline, no LLM) or ``llm`` (an OpenAI-compatible
endpoint, with the keyword verdict beside it). A judge that cannot score an item returns a Judgement
with ``verdict=None`` and an ``error`` — never a silent 0.

- :func:`judging`: what a run judges with (keywords, the verdict judge, the LLM client or ``None``);
- :func:`llm_client`: the LLM client of a command that needs one (``generate``, ``compare --judge
  pairwise``), or one line saying what to set;
- :func:`source_of`: who judged a run (MLflow's assessment source), from its params.
"""

from __future__ import annotations

from typing import Any

from ragmem.clients.llm_client import JudgeClient
from ragmem.config.loading import as_section
from ragmem.config.settings import JudgeSettings
from ragmem.errors import RagmemError
from ragmem.judges.base import Judge, JudgeItem, Judgement
from ragmem.judges.keyword import KeywordJudge
from ragmem.judges.llm import LLMJudge
from ragmem.text.keywords import KeywordExtractor

__all__ = ["Judge", "JudgeItem", "Judgement", "KeywordJudge", "LLMJudge", "build_judge", "judging", "llm_client",
           "require_llm", "source_of"]


def build_judge(settings, keywords: KeywordExtractor, zero_division: float, client=None) -> Judge:
    """The judge named by ``judge.type`` (:class:`ragmem.config.settings.JudgeSettings`, or a dict of
    them); ``llm`` needs the :class:`ragmem.clients.llm_client.JudgeClient`."""
    settings = as_section(JudgeSettings, settings, "judge")
    keyword = KeywordJudge(keywords, threshold=settings.threshold, zero_division=zero_division)
    return LLMJudge(client, keyword) if settings.asks_llm else keyword


def judging(cfg) -> tuple[KeywordExtractor, Judge, Any]:
    """The keyword extractor, the judge and its LLM client (``None`` offline) that a
    :class:`ragmem.config.loading.RunConfig` asks for: what runs and memory benchmarks judge with."""
    keywords = KeywordExtractor(cfg.keywords.tokenizer, cfg.keywords.stopwords, cfg.keywords.cache_size)
    client = JudgeClient(cfg.judge, rubrics=cfg.rubric_definitions()) if cfg.judge.asks_llm else None
    return keywords, build_judge(cfg.judge, keywords, cfg.zero_division, client), client


def require_llm(settings: JudgeSettings, refused: str) -> None:
    """``refused`` (the command's one line: what needs an LLM and what to set) raised when the judge
    asks no LLM."""
    if not settings.asks_llm:
        raise RagmemError(refused)


def llm_client(settings: JudgeSettings, refused: str) -> JudgeClient:
    """The LLM client of a command that needs one (``refused``: see :func:`require_llm`)."""
    require_llm(settings, refused)
    return JudgeClient(settings)


def source_of(params: dict[str, str]) -> tuple[str, str]:
    """Who judged a run, from its params, as MLflow names an assessment's source: ``("LLM_JUDGE",
    model)`` or ``("CODE", "ragmem keyword judge")``."""
    if JudgeSettings.model_construct(type=params.get("judge.type", "keyword")).asks_llm:
        return "LLM_JUDGE", params.get("judge.model", "llm")
    return "CODE", "ragmem keyword judge"
