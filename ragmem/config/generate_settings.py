"""The settings of ``ragmem generate`` (the ``generate:`` section): which questions an LLM writes
from a team's documents, in what mix, and the checks each must pass before it is kept
(:mod:`ragmem.testsets.writing`). Part of the settings schema (:mod:`ragmem.config.settings`)."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from annotated_types import Ge, Le
from pydantic import field_validator

from ragmem.config.sections import Positive, Section, Share, setting

QUESTION_TYPES = ("single_hop", "multi_hop", "comparison", "unanswerable")
CHECKS = ("language", "standalone", "duplicate", "grounded", "answerable")
DEFAULT_MIX = {"single_hop": 0.5, "multi_hop": 0.2, "comparison": 0.15, "unanswerable": 0.15}


class GenerateSettings(Section):
    corpus: Optional[str] = setting(None, "the documents (a folder, a file or a corpus JSON; relative: against the "
                                          "config file's folder) when the command names none")
    n: Positive = setting(100, "questions to write (--n)")
    mix: dict[str, Share] = setting(DEFAULT_MIX, "share of each question type: single_hop, multi_hop, comparison, "
                                                 "unanswerable (shares summing to 1)")
    checks: list[Literal[CHECKS]] = setting(list(CHECKS), "checks a written question must pass to be kept: "  # type: ignore[valid-type]  # (the choices declared once, as a tuple)
                                                          "language, standalone, duplicate, grounded, answerable")
    duplicate_threshold: Share = setting(0.8, "a question whose token set overlaps a kept one's by at least this "
                                              "(Jaccard) is a near-duplicate")
    grounded_share: Share = setting(0.8, "share of the reference answer's keywords found in its contexts that "
                                         "grounds it with no request (below: the judge decides)")
    oversample: Annotated[float, Ge(1), Le(10)] = setting(1.5, "candidates written per question still needed, in "
                                                               "each round (checks drop some)")
    max_rounds: Annotated[int, Ge(1), Le(20)] = setting(3, "rounds of new candidates for a type still short after "
                                                           "its checks")
    unanswerable_top_k: Positive = setting(3, "best-matching chunks (BM25) an unanswerable question is checked against")
    max_chunks: Positive = setting(100_000, "a corpus of more chunks is sampled to this many as it is read (seeded, "
                                            "uniform): memory holds the sample, never the corpus")

    @field_validator("mix")
    @classmethod
    def _mix(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - set(QUESTION_TYPES))
        if unknown:
            raise ValueError(f"{unknown[0]} is not a question type ({', '.join(QUESTION_TYPES)})")
        total = sum(value.values())
        if abs(total - 1) > 1e-6:
            raise ValueError(f"the shares sum to {total:g}, expected 1")
        return value

    @field_validator("checks")
    @classmethod
    def _checks(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("a check is named twice")
        return value
