"""Binary agreement between the judge's verdict and the dataset's label (positive class = 1).

Pairs are ``[label, verdict]``: tp ``[1, 1]``, fn ``[1, 0]``, fp ``[0, 1]``, tn ``[0, 0]``.
Examples without a label, whose agent call failed, or that the judge could not score are left out and
counted (``n_unscored``).

- ``accuracy  = (tp + tn) / n``         (n = tp + fn + fp + tn; the original write-up repeated
  ``[1, 1]`` in the denominator by mistake)
- ``precision = tp / (tp + fp)``        undefined when nothing was judged correct
- ``recall    = tp / (tp + fn)``        undefined when no label is 1
- ``f1        = 2tp / (2tp + fp + fn)`` undefined when there is no positive at all

Undefined cases take ``zero_division`` (default 0) and are counted in ``undefined_<metric>``. The
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

from ragmem.metrics._division import divide
from ragmem.metrics.base import MetricResult

NAMES = ("accuracy", "precision", "recall", "f1")


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
    tp, fn, fp, tn = c["tp"], c["fn"], c["fp"], c["tn"]
    fractions = {
        "accuracy": (tp + tn, tp + fn + fp + tn),
        "precision": (tp, tp + fp),
        "recall": (tp, tp + fn),
        "f1": (2 * tp, 2 * tp + fp + fn),
    }
    values: dict[str, float | None] = {}
    undefined: dict[str, int] = {}
    for name, (num, den) in fractions.items():
        values[name], was_undefined = divide(num, den, zero_division)
        undefined[name] = int(was_undefined)
    values.update({f"confusion_{k}": float(v) for k, v in c.items()})
    return MetricResult(values=values, undefined=undefined)
