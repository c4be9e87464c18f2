"""``pass_rate``: the share of judged examples whose verdict is 1, labels or not.

    pass_rate = |{verdict = 1}| / |{judged}|

An example is judged when its agent call succeeded and the judge (keyword or LLM) gave a verdict.
This is the system's quality as the judge sees it, the number a RAGAS or DeepEval user looks for
first; it needs no labels. (accuracy, precision, recall and f1 are something else: the judge's
agreement with the dataset's labels, see :mod:`ragmem.metrics.classification`.) Null when nothing
was judged; ``n_judged`` counts the examples it is over. An example without a reference answer
is not judged by a judge that needs one (the keyword judge): left out, counted, and noted. Always computed and reported first. With
``judge.samples`` N > 1 the verdict is the majority of N samples, and the interval resamples the
samples too (two-stage: :func:`ragmem.metrics.reliability.majority_aggregator`).

>>> import pandas as pd
>>> table = pd.DataFrame({"verdict": [1, 0, 1, None], "error": [None, None, None, None]})
>>> compute(table, None, ["pass_rate"]).values
{'pass_rate': 0.6666666666666666, 'n_judged': 3.0}
"""

from __future__ import annotations

import pandas as pd

from ragmem.metrics import names, needs
from ragmem.metrics.base import counted_note, Family, MetricResult, scored_mask, unless_note
from ragmem.metrics.reliability import majority_aggregator

NAMES = names.VERDICTS.selectable


def _judged(table: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    verdict = pd.to_numeric(table["verdict"], errors="coerce") if "verdict" in table else pd.Series(dtype=float)
    return verdict, scored_mask(table) & verdict.notna()


def compute(table: pd.DataFrame, ctx, wanted) -> MetricResult:
    verdict, judged = _judged(table)
    n = int(judged.sum())
    llm = getattr(ctx, "llm", None) is not None  # (the LLM judge: reference-free on the contexts)
    unasked = _without_reference(table)
    notes: list[str] = [counted_note("pass_rate-no-reference", _no_context_note if llm else _no_reference_note, unasked)
             ] if unasked else []
    free = int((judged & ~needs.holding(table, needs.REFERENCE)).sum())  # (judged without a reference)
    if free:
        notes.append(counted_note("pass_rate-reference-free", _reference_free_note, free))
    if not n:
        why = ("no example has a reference answer" + (" or contexts" if llm else "")) if unasked else \
            "every agent or judge call failed"
        hint = "; judge.type llm judges an answer without one, on its contexts" if unasked and not llm else ""
        return MetricResult(values={"pass_rate": None, "n_judged": 0.0},
                            notes=[unless_note(f"no example was judged ({why}): pass_rate not computed{hint}", "pass_rate")])
    return MetricResult(values={"pass_rate": float(verdict[judged].mean()), "n_judged": float(n)}, notes=notes)


def _without_reference(table: pd.DataFrame) -> int:
    """The answered examples the judge was not asked about: they have no reference answer, and the
    judge needs one (:func:`ragmem.run.pipeline.judge`)."""
    if "judge_reason" not in table or "verdict" not in table:
        return 0
    return int((scored_mask(table) & table["verdict"].isna() & (table["judge_reason"] == needs.WHY[needs.REFERENCE])).sum())


def _no_context_note(n: int) -> str:
    return (f"pass_rate: {n} {'example has' if n == 1 else 'examples have'} neither a reference answer nor "
            f"contexts: not judged")


def _reference_free_note(n: int) -> str:
    return (f"pass_rate: {n} {'verdict is' if n == 1 else 'verdicts are'} reference-free (no reference answer): "
            f"the answer correct and supported by its contexts (judge task answer_supported)")


def _no_reference_note(n: int) -> str:
    return (f"pass_rate: {n} {'example has' if n == 1 else 'examples have'} no reference answer, which the keyword "
            f"judge needs: not judged (judge.type: llm gives a reference-free verdict)")


def aggregators(table: pd.DataFrame, names, zero_division: float, scorer=None) -> dict:
    verdict, judged = _judged(table)
    if "pass_rate" not in names:
        return {}
    return {"pass_rate": majority_aggregator(verdict.astype(float), judged, table)}


FAMILY = Family(names.VERDICTS, compute, aggregators)
