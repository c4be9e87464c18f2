"""What every judge takes and returns (see :mod:`ragmem.judges`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


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
    votes: tuple[int, ...] | None = None  # judge.samples > 1: each valid sample's verdict (the majority decides)


class Judge(Protocol):
    name: str

    def judge(self, items: list[JudgeItem]) -> list[Judgement]: ...

    def signature(self) -> str: ...
