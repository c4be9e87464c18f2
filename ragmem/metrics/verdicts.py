"""``pass_rate``: the share of judged examples whose verdict is 1, labels or not.

    pass_rate = |{verdict = 1}| / |{judged}|

An example is judged when its agent call succeeded and the judge (keyword or LLM) gave a verdict.
This is the system's quality as the judge sees it, the number a RAGAS or DeepEval user looks for
first; it needs no labels. (accuracy, precision, recall and f1 are something else: the judge's
agreement with the dataset's labels, see :mod:`ragmem.metrics.classification`.) Null when nothing
was judged; ``n_judged`` counts the examples it is over. Always computed and reported first. With
``judge.samples`` N > 1 the verdict is the majority of N samples, and the interval resamples the
samples too (two-stage: :func:`ragmem.metrics.reliability.majority_aggregator`).

>>> import pandas as pd
>>> table = pd.DataFrame({"verdict": [1, 0, 1, None], "error": [None, None, None, None]})
>>> compute(table, None, ["pass_rate"]).values
{'pass_rate': 0.6666666666666666, 'n_judged': 3.0}
"""

from __future__ import annotations

import pandas as pd

from ragmem.metrics import names
from ragmem.metrics.base import Family, MetricResult, scored_mask, unless_note
from ragmem.metrics.reliability import majority_aggregator

NAMES = names.VERDICTS.selectable


def _judged(table: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    verdict = pd.to_numeric(table["verdict"], errors="coerce") if "verdict" in table else pd.Series(dtype=float)
    return verdict, scored_mask(table) & verdict.notna()


def compute(table: pd.DataFrame, ctx, wanted) -> MetricResult:
    verdict, judged = _judged(table)
    n = int(judged.sum())
    if not n:
        return MetricResult(values={"pass_rate": None, "n_judged": 0.0},
                            notes=[unless_note("no example was judged (every agent or judge call failed): "
                                               "pass_rate not computed", "pass_rate")])
    return MetricResult(values={"pass_rate": float(verdict[judged].mean()), "n_judged": float(n)})


def aggregators(table: pd.DataFrame, names, zero_division: float, scorer=None) -> dict:
    verdict, judged = _judged(table)
    if "pass_rate" not in names:
        return {}
    return {"pass_rate": majority_aggregator(verdict.astype(float), judged, table)}


FAMILY = Family(names.VERDICTS, compute, aggregators)
