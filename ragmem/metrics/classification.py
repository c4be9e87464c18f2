"""Binary agreement between the judge's verdict and the dataset's label (positive class = 1).

Pairs are ``[label, verdict]``: tp ``[1, 1]``, fn ``[1, 0]``, fp ``[0, 1]``, tn ``[0, 0]``.
Examples without a label, whose agent call failed, or that the judge could not score are left out and
counted (``n_unscored``).

- ``accuracy  = (tp + tn) / n``         (n = tp + fn + fp + tn; the original write-up repeated
  ``[1, 1]`` in the denominator by mistake)
- ``precision = tp / (tp + fp)``        undefined when nothing was judged correct
- ``recall    = tp / (tp + fn)``        undefined when no label is 1
- ``f1        = 2tp / (2tp + fp + fn)`` undefined when there is no positive at all

Undefined cases take ``zero_division`` (default ``nan``: null) and are counted in ``undefined_<metric>``. The
counts are computed here rather than with ``sklearn.metrics`` because they are the sufficient
statistics the run logs and that bootstrap intervals resample; the tests check the results against
scikit-learn's binary ``precision_score``/``recall_score``/``f1_score``.

>>> from ragmem.metrics.classification import confusion_counts, classification_metrics
>>> confusion_counts([1, 1, 0, 0], [1, 0, 1, 0])
{'tp': 1, 'fn': 1, 'fp': 1, 'tn': 1}
>>> classification_metrics([0, 0], [0, 0], zero_division=0.0).values["precision"]
0.0
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from ragmem.metrics import names
from ragmem.metrics._division import divide
from ragmem.metrics.base import Family, MetricResult, ratio_aggregator, scored_mask, unless_note
from ragmem.schema import LABEL_SET_ASIDE

NAMES = names.CLASSIFICATION.selectable
COMPANIONS = tuple(m.name for m in names.CLASSIFICATION.companions)  # the confusion counts, n_classified

#: (numerator, denominator) of each metric from the confusion counts: for one run's counts and for
#: per-example indicator columns alike (the bootstrap sums those).
FRACTIONS = {
    "accuracy": lambda tp, fn, fp, tn: (tp + tn, tp + fn + fp + tn),
    "precision": lambda tp, fn, fp, tn: (tp, tp + fp),
    "recall": lambda tp, fn, fp, tn: (tp, tp + fn),
    "f1": lambda tp, fn, fp, tn: (2 * tp, 2 * tp + fp + fn),
}


def confusion_counts(labels: Sequence[int], verdicts: Sequence[int]) -> dict[str, int]:
    """Counts of ``[label, verdict]`` pairs; both sequences hold 0/1 and have the same length."""
    if len(labels) != len(verdicts):
        raise ValueError(f"labels ({len(labels)}) and verdicts ({len(verdicts)}) differ in length")
    counts = {"tp": 0, "fn": 0, "fp": 0, "tn": 0}
    for label, verdict in zip(labels, verdicts):
        if label not in (0, 1) or verdict not in (0, 1):
            raise ValueError(f"labels and verdicts must be 0 or 1, got [{label}, {verdict}]")
        key = ("tn", "fp", "fn", "tp")[2 * label + verdict]
        counts[key] += 1
    return counts


def classification_metrics(labels: Sequence[int], verdicts: Sequence[int],
                           zero_division: float = 0.0) -> MetricResult:
    """accuracy, precision, recall and f1 of verdicts against labels (see the module docstring)."""
    c = confusion_counts(labels, verdicts)
    values: dict[str, float | None] = {}
    undefined: dict[str, int] = {}
    for name, fraction in FRACTIONS.items():
        num, den = fraction(c["tp"], c["fn"], c["fp"], c["tn"])
        values[name], was_undefined = divide(num, den, zero_division)
        undefined[name] = int(was_undefined)
    values.update({f"confusion_{k}": float(v) for k, v in c.items()})
    return MetricResult(values=values, undefined=undefined)


def _classified(table: pd.DataFrame) -> pd.Series:
    """Rows with a successful call, a label and a verdict."""
    label, verdict = (pd.to_numeric(table[c], errors="coerce") for c in ("label", "verdict"))
    return scored_mask(table) & label.notna() & verdict.notna()


def compute(table: pd.DataFrame, ctx, wanted) -> MetricResult:
    """The selected metrics of the judge against the labels, with the confusion counts."""
    if table["label"].isna().all() and LABEL_SET_ASIDE in table and table[LABEL_SET_ASIDE].notna().any():
        return MetricResult(values={n: None for n in wanted},  # (the reliability family's note says why)
                            notes=[unless_note("every label was set aside (they judged other answers): "
                                               "accuracy/precision/recall/f1 not computed", *wanted)])
    if table["label"].isna().all():
        return MetricResult(values={n: None for n in wanted},
                            notes=[unless_note("no labels in the dataset: accuracy/precision/recall/f1 not computed",
                                               *wanted)])
    rows = table[_classified(table)]
    if rows.empty:  # every call or judgement failed: nothing was classified, so nothing is defined
        return MetricResult(values={**{n: None for n in wanted}, "n_classified": 0.0},
                            notes=[unless_note("no example was classified (every agent or judge call failed): "
                                               "accuracy/precision/recall/f1 not computed", *wanted)])
    result = classification_metrics(rows["label"].astype(int).tolist(), rows["verdict"].astype(int).tolist(),
                                    ctx.zero_division)
    result.values["n_classified"] = float(len(rows))
    result.values = {k: v for k, v in result.values.items() if k in wanted or k in COMPANIONS}
    result.undefined = {k: v for k, v in result.undefined.items() if k in wanted}
    return result


def confusion_indicators(table: pd.DataFrame) -> list[pd.Series]:
    """Per example, 0/1 indicators tp, fn, fp, tn of ``[label, verdict]`` on the classified rows
    (a table without labels or verdicts: all 0). What this family's aggregators and the judge's
    reliability (:mod:`ragmem.metrics.reliability`) sum."""
    if not {"label", "verdict"} <= set(table):
        return [pd.Series(0.0, index=table.index) for _ in range(4)]
    valid = _classified(table)
    label, verdict = (pd.to_numeric(table[c], errors="coerce") for c in ("label", "verdict"))
    return [(valid & (label == a) & (verdict == b)).astype(float) for a, b in ((1, 1), (1, 0), (0, 1), (0, 0))]


def aggregators(table: pd.DataFrame, names, zero_division: float, scorer=None) -> dict:
    """Per-example confusion indicators; each metric is a ratio of their sums."""
    if not {"label", "verdict"} <= set(table):
        return {}
    tp, fn, fp, tn = confusion_indicators(table)
    classified = tp + fn + fp + tn
    return {name: ratio_aggregator(*FRACTIONS[name](tp, fn, fp, tn), zero_division, classified) for name in names
            if name in FRACTIONS}  # (its counts: no interval)


FAMILY = Family(names.CLASSIFICATION, compute, aggregators)
