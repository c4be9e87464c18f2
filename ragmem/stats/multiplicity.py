"""Many metrics tested at once: Holm's correction over the family, the permutations it needs, and
the smallest difference a paired test could have detected.

Two runs compared on 50 metrics at p < 0.05 each show about 2.5 "significant" differences when
nothing changed at all. Holm's step-down procedure keeps the chance that noise marks *any* metric of
the family at ``alpha``, whatever the dependence between the tests (correlated metrics such as
precision and f1 make it conservative, never wrong). A randomization p-value cannot be smaller than
``1 / (permutations + 1)``, so a family of ``m`` needs more than ``m / alpha`` permutations before
anything can be marked at all: :func:`permutations_for` gives ten times that.

Written by hand: statsmodels' ``multipletests`` does the same adjustment (the tests hold the two
equal) but would add statsmodels and scipy to every ``ragmem compare``.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any


def holm(family: list[dict[str, Any]], alpha: float) -> None:
    """Set ``p_holm`` (Holm's step-down adjusted p-value over ``family``) and ``marked`` (interval
    excludes 0 and ``p_holm`` < ``alpha``) on each row: ``p_holm`` of the k-th smallest of m
    p-values is ``max over j <= k of min(1, (m - j + 1) p_(j))``; a row without a p-value is not
    counted in m and gets ``None``.

    >>> rows = [{"p_value": p, "ci_low": 0.1, "ci_high": 0.2} for p in (0.01, 0.04, 0.03)]
    >>> holm(rows, 0.05); [(r["p_holm"], r["marked"]) for r in rows]
    [(0.03, True), (0.06, False), (0.06, False)]
    """
    ranked = sorted((r for r in family if r["p_value"] is not None), key=lambda r: r["p_value"])
    running = 0.0
    for k, row in enumerate(ranked):
        running = max(running, min(1.0, (len(ranked) - k) * row["p_value"]))
        row["p_holm"] = running
    for row in family:
        row.setdefault("p_holm", None)
        excludes = row["ci_low"] is not None and (row["ci_low"] > 0 or row["ci_high"] < 0)
        row["marked"] = bool(excludes and row["p_holm"] is not None and row["p_holm"] < alpha)


def permutations_for(m: int, alpha: float, at_least: int) -> int:
    """Randomization permutations for a family of ``m`` tests at ``alpha``: ``at_least``, raised to
    ``10 m / alpha`` so that the smallest Holm-adjusted p-value possible, ``m / (permutations + 1)``,
    is a tenth of ``alpha`` (at 1,000 permutations, 51 metrics could never be marked: 51/1001 > 0.05).

    >>> permutations_for(55, 0.05, 1000)
    11000
    >>> permutations_for(1, 0.05, 1000)
    1000
    """
    return max(at_least, math.ceil(10 * m / alpha))


def min_detectable(ci_low: float | None, ci_high: float | None, confidence: float = 0.95,
                   power: float = 0.8) -> float | None:
    """The smallest ``|B - A|`` a two-sided paired test at ``confidence`` detects with probability
    ``power``, given the spread its interval shows: ``(z_(1-a/2) + z_power) * SE`` with
    ``SE = (ci_high - ci_low) / (2 z_(1-a/2))`` (normal approximation; ``a = 1 - confidence``).
    A difference smaller than it that comes out "not significant" is not evidence that there is
    none: the comparison could not have seen it. ``None`` without an interval.

    >>> round(min_detectable(-0.0392, 0.0392), 4)  # SE 0.02: 2.80 standard errors
    0.056
    """
    if ci_low is None or ci_high is None:
        return None
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    return (z + NormalDist().inv_cdf(power)) * (ci_high - ci_low) / (2 * z)
