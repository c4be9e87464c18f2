"""The offline judge: keyword overlap between the reference and the generated answer.

``overlap = |K(reference) ∩ K(generated)| / |K(reference)|``; verdict 1 when
``overlap > threshold`` (strictly; default 0.7), else 0. A reference without keywords makes the
overlap undefined: it takes ``zero_division``; with ``nan`` (the default) the item is left
unjudged (``verdict=None``, its reason recorded) and counted; with 0 its verdict is 0.
"""

from __future__ import annotations

import math

from ragmem.errors import ConfigError
from ragmem.judges.base import JudgeItem, Judgement
from ragmem.metrics._division import divide
from ragmem.text.keywords import KeywordExtractor

DEFAULT_THRESHOLD = 0.7


class KeywordJudge:
    name = "keyword"

    def __init__(self, keywords: KeywordExtractor, threshold: float = DEFAULT_THRESHOLD,
                 zero_division: float = math.nan):
        if not 0.0 <= threshold <= 1.0:
            raise ConfigError(f"judge.threshold: must be between 0 and 1, got {threshold}")
        self.keywords, self.threshold, self.zero_division = keywords, threshold, zero_division
        self.n_undefined = 0

    def overlap(self, reference: str, generated: str) -> tuple[float, bool]:
        ref = self.keywords(reference)
        return divide(len(ref & self.keywords(generated)), len(ref), self.zero_division)

    def judge(self, items: list[JudgeItem]) -> list[Judgement]:
        out = []
        for item in items:
            value, undefined = self.overlap(item.reference_answer, item.generated_answer)
            self.n_undefined += undefined
            if math.isnan(value):
                out.append(Judgement(None, None, error="reference has no keywords (overlap 0/0)"))
                continue
            verdict = int(value > self.threshold)
            note = " (reference has no keywords)" if undefined else ""
            out.append(Judgement(verdict, value,
                                 reason=f"overlap {value:.3f} {'>' if verdict else '<='} {self.threshold}{note}"))
        return out

    def signature(self) -> str:
        return f"judge:keyword|thr:{self.threshold}|{self.keywords.signature()}"
