"""The estimators of the judge's reliability, as plain functions (numpy only): Cohen's kappa of
verdicts against labels, Fleiss' kappa of repeated samples, the majority of samples and the
prediction-powered mean. :mod:`ragmem.metrics.reliability` applies them to a run.

Written by hand rather than imported: ``statsmodels`` (Fleiss' kappa), ``scikit-learn`` (Cohen's)
and ``ppi-python`` (the PPI estimator) would add numba, scipy and their imports to every run for
short formulas; all three are the tests' oracles (``tests/metrics/test_reliability.py``: equal to 1e-9).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np

__all__ = ["PPIEstimate", "ppi_mean_ci", "ppi_statistics", "ppi_from_sums", "fleiss_kappa", "binary_kappa", "vbinary_kappa", "majority", "majority_odds"]


@dataclass(frozen=True)
class PPIEstimate:
    """A prediction-powered mean with its interval; ``lam`` is the weight given to the judge."""

    estimate: float
    low: float
    high: float
    lam: float
    n_labelled: int
    n_unlabelled: int


def _power_tuned_lam(labels: np.ndarray, judged: np.ndarray, judged_unlabelled: np.ndarray) -> float:
    """The weight λ that minimises the estimate's variance (PPI++, Angelopoulos, Duchi and Zrnic 2023):

        λ = Cov_n(Y, Ŷ) / ((1 + n/N) · Var(Ŷ ∪ Ŷ_u)),  clipped to [0, 1]

    with ``Cov_n`` the covariance over the n labelled examples (divided by n) and ``Var`` the sample
    variance (divided by n + N - 1) of every judge verdict, labelled and unlabelled. A judge whose
    verdicts never vary carries no information: λ = 0 (the labels alone)."""
    n, big_n = len(labels), len(judged_unlabelled)
    pooled = np.concatenate([judged, judged_unlabelled])
    variance = float(np.var(pooled, ddof=1)) if len(pooled) > 1 else 0.0
    if variance == 0.0:
        return 0.0
    covariance = float(np.mean((labels - labels.mean()) * (judged - judged.mean())))
    return min(1.0, max(0.0, covariance / ((1 + n / big_n) * variance)))


def _t_quantile(p: float, df: float) -> float:
    from scipy.special import stdtrit  # (scipy.special alone: scipy.stats takes 0.3 s to import)

    return float(stdtrit(df, p))


def pass_rate_ppi(s: Sequence[float], confidence: float = 0.95) -> PPIEstimate | None:
    """``pass_rate_ppi`` as a run gives it: :func:`ppi_from_sums` within [0, 1] (the range of a pass
    rate) and with the small-sample correction: the labels' variance divided by n - 1 and the
    quantile Student's t on n - 1 degrees of freedom instead of the normal one. The normal interval
    on 33 labels held the true pass rate 92.4% of the time where 95% was asked, on 10 labels 84%
    (``benchmarks/bench_coverage.py``); the labels are few where PPI is used, and their variance is
    most of the interval's."""
    return ppi_from_sums(s, confidence, (0.0, 1.0), small_sample=True)


def ppi_mean_ci(labels: Sequence[float], judged: Sequence[float], judged_unlabelled: Sequence[float],
                confidence: float = 0.95, lam: float | None = None) -> PPIEstimate:
    """The mean a human would give (a pass rate, when the values are 0/1 verdicts), estimated from
    ``labels`` (human verdicts Y on n examples), the judge's verdicts on the same examples (Ŷ) and
    its verdicts on N unlabelled ones (Ŷ_u):

        θ = λ · mean(Ŷ_u) + mean(Y − λ · Ŷ)
        se² = λ² · var₀(Ŷ_u) / N + var₀(Y − λ · Ŷ) / n        (var₀: divided by the count)
        interval: θ ± z · se,  z the normal quantile of (1 + confidence) / 2

    The second term corrects the judge's mean by its error measured on the labelled examples, so
    the estimate is unbiased whatever the judge's errors; ``lam`` (default: power-tuned, see
    :func:`_power_tuned_lam`, as ``ppi_py.ppi_mean_ci`` chooses it by default) weighs the judge:
    λ = 1 is plain PPI, λ = 0 the labels alone. This is ``ppi_py.ppi_mean_ci(Y, Ŷ, Ŷ_u,
    alpha=1 - confidence)`` (Angelopoulos et al., Science 2023; PPI++ 2023) for one mean.

    >>> est = ppi_mean_ci([1, 0, 1, 1], [1, 0, 1, 0], [1, 1, 0, 1, 0, 1], lam=1.0)
    >>> round(est.estimate, 4), est.n_labelled, est.n_unlabelled
    (0.9167, 4, 6)
    >>> round(ppi_mean_ci([1, 0], [1, 1], [1, 1, 1]).estimate, 4)  # a judge that always passes: labels alone
    0.5
    """
    y = np.asarray(labels, dtype=float)
    yhat = np.asarray(judged, dtype=float)
    yhat_u = np.asarray(judged_unlabelled, dtype=float)
    if y.ndim != 1 or y.shape != yhat.shape:
        raise ValueError(f"labels and judged must be two sequences of the same length, got {y.shape} and {yhat.shape}")
    if len(y) < 2 or len(yhat_u) < 1:
        raise ValueError(f"needs at least 2 labelled and 1 unlabelled example, got {len(y)} and {len(yhat_u)}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    weight = _power_tuned_lam(y, yhat, yhat_u) if lam is None else float(lam)
    estimate = weight * float(yhat_u.mean()) + float(np.mean(y - weight * yhat))
    se = math.sqrt((weight * float(yhat_u.std())) ** 2 / len(yhat_u) + float(np.std(y - weight * yhat)) ** 2 / len(y))
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    return PPIEstimate(estimate, estimate - z * se, estimate + z * se, weight, len(y), len(yhat_u))


def ppi_statistics(labels: np.ndarray, judged: np.ndarray, labelled: np.ndarray, unlabelled: np.ndarray) -> np.ndarray:
    """Per example, what :func:`ppi_from_sums` adds up (n, 9): ``[1, y, ŷ, y², ŷ², yŷ, 0, 0, 0]`` for
    a ``labelled`` example, ``[0, .., 0, 1, ŷ, ŷ²]`` for an ``unlabelled`` judged one, zeros else."""
    y = np.where(labelled, labels, 0.0)
    f = np.where(labelled, judged, 0.0)
    u = np.where(unlabelled, judged, 0.0)
    return np.column_stack([labelled.astype(float), y, f, y * y, f * f, y * f, unlabelled.astype(float), u, u * u])


def ppi_from_sums(s: Sequence[float], confidence: float = 0.95,
                  bounds: tuple[float, float] | None = None, small_sample: bool = False) -> PPIEstimate | None:
    """:func:`ppi_mean_ci` (power-tuned λ) from the column sums of :func:`ppi_statistics`: the
    same estimate and interval from counts, sums, sums of squares and of products, so that chunks
    of examples add up; ``None`` without 2 labelled and 1 unlabelled example.

    ``bounds``: the range of the values averaged (``(0, 1)`` for verdicts and scores). The interval
    is ``θ ± z·se``, a normal one, and near the ends of the range (a pass rate of 0.95 on 20 labels)
    it reaches past them: ``[0.554, 1.008]`` was printed for a pass rate. The mean cannot lie
    there, so the estimate and the interval are cut at the bounds; the interval then contains the
    truth whenever the uncut one did (its coverage cannot fall), and it never shows an impossible
    value. Without ``bounds``, ``ppi_py``'s interval as it is (the oracle tests hold the two equal).

    >>> y, f, u = np.array([1., 0, 1, 1]), np.array([1., 0, 1, 0]), np.array([1., 1, 0, 1, 0, 1])
    >>> rows = ppi_statistics(np.r_[y, u * 0], np.r_[f, u], np.r_[[True] * 4, [False] * 6], np.r_[[False] * 4, [True] * 6])
    >>> a, b = ppi_from_sums(rows.sum(axis=0)), ppi_mean_ci(y, f, u)
    >>> bool(abs(a.estimate - b.estimate) < 1e-12 and abs(a.low - b.low) < 1e-12)
    True
    """
    n, sy, sf, syy, sff, syf, big_n, su, suu = (float(v) for v in s)
    if n < 2 or big_n < 1:
        return None
    total = n + big_n
    variance = (sff + suu - (sf + su) ** 2 / total) / (total - 1)
    covariance = syf / n - (sy / n) * (sf / n)
    lam = 0.0 if variance <= 0 else min(1.0, max(0.0, covariance / ((1 + n / big_n) * variance)))
    estimate = lam * su / big_n + (sy - lam * sf) / n
    var_u = max(0.0, suu / big_n - (su / big_n) ** 2)
    var_r = max(0.0, (syy - 2 * lam * syf + lam * lam * sff) / n - ((sy - lam * sf) / n) ** 2)
    if small_sample:  # the labels' variance unbiased, and Student's t on n - 1 degrees of freedom
        var_r *= n / (n - 1)
    se = math.sqrt(lam * lam * var_u / big_n + var_r / n)
    z = _t_quantile((1 + confidence) / 2, n - 1) if small_sample else NormalDist().inv_cdf((1 + confidence) / 2)
    low, high = estimate - z * se, estimate + z * se
    if bounds is not None:
        estimate, low, high = (min(bounds[1], max(bounds[0], v)) for v in (estimate, low, high))
    return PPIEstimate(estimate, low, high, lam, int(n), int(big_n))


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa of repeated verdicts: ``counts[i][j]`` is how many of item i's m samples gave
    category j (every item the same m ≥ 2):

        P_i = (Σ_j n_ij² − m) / (m (m − 1)),   P̄ = mean_i P_i
        p_j = Σ_i n_ij / (N m),                P̄_e = Σ_j p_j²
        κ = (P̄ − P̄_e) / (1 − P̄_e)

    1 when every item's samples agree, 0 at the agreement chance alone gives, below 0 for less.
    ``None`` (undefined, never 0) when every sample of every item falls in one category
    (P̄_e = 1). This is ``statsmodels.stats.inter_rater.fleiss_kappa(counts, method="fleiss")``.

    >>> round(fleiss_kappa([[3, 0], [0, 3], [2, 1], [1, 2]]), 4)  # P̄ = 2/3, P̄_e = 1/2
    0.3333
    >>> fleiss_kappa([[3, 0], [3, 0]]) is None
    True
    """
    table = np.asarray(counts, dtype=float)
    if table.ndim != 2 or table.shape[0] < 1 or table.shape[1] < 2:
        raise ValueError(f"counts must be items x categories (at least 2 categories), got shape {table.shape}")
    m = table.sum(axis=1)
    if not np.all(m == m[0]) or m[0] < 2:
        raise ValueError("every item needs the same number of samples, at least 2")
    raters = float(m[0])
    agreement = float(np.mean((np.sum(table ** 2, axis=1) - raters) / (raters * (raters - 1))))
    chance = float(np.sum((table.sum(axis=0) / table.sum()) ** 2))
    if chance >= 1.0:
        return None
    return (agreement - chance) / (1 - chance)


def binary_kappa(tp: float, fn: float, fp: float, tn: float) -> float | None:
    """Cohen's kappa of binary (label, verdict) counts:

        p_o = (tp + tn) / n,   p_e = ((tp + fn)(tp + fp) + (tn + fp)(tn + fn)) / n²
        κ = (p_o − p_e) / (1 − p_e)

    ``None`` (undefined, never 0) when there is nothing or when labels and verdicts all fall in one
    class (p_e = 1). This is scikit-learn's ``cohen_kappa_score(labels, verdicts)``.

    >>> binary_kappa(tp=1, fn=0, fp=1, tn=2)  # p_o = 3/4, p_e = (1·2 + 3·2) / 16 = 1/2
    0.5
    >>> binary_kappa(tp=0, fn=8, fp=1, tn=7)  # the seed's keyword judge: 7 of 16 agree, at chance
    -0.125
    >>> binary_kappa(tp=4, fn=0, fp=0, tn=0) is None
    True
    """
    n = tp + fn + fp + tn
    if n <= 0:
        return None
    expected = ((tp + fn) * (tp + fp) + (tn + fp) * (tn + fn)) / (n * n)
    if expected >= 1.0 - 1e-12:
        return None
    return ((tp + tn) / n - expected) / (1.0 - expected)


def vbinary_kappa(sums: np.ndarray) -> np.ndarray:
    """:func:`binary_kappa` of each row ``[tp, fn, fp, tn]`` of ``sums`` (NaN: undefined)."""
    tp, fn, fp, tn = sums[:, 0], sums[:, 1], sums[:, 2], sums[:, 3]
    n = tp + fn + fp + tn
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = ((tp + fn) * (tp + fp) + (tn + fp) * (tn + fn)) / (n * n)
        kappa = ((tp + tn) / n - expected) / (1.0 - expected)
    return np.where((n > 0) & (expected < 1.0 - 1e-12), kappa, np.nan)


def majority(votes: Sequence[int]) -> tuple[int | None, float]:
    """The majority of 0/1 ``votes`` and the share of votes that agree with it; a tie is
    ``None`` (undecided), its share 0.5.

    >>> majority([1, 1, 0, 1, 1])
    (1, 0.8)
    >>> majority([1, 0])
    (None, 0.5)
    """
    if not votes:
        raise ValueError("majority of no votes")
    yes = sum(votes)
    no = len(votes) - yes
    if yes == no:
        return None, 0.5
    return int(yes > no), max(yes, no) / len(votes)


def majority_odds(yes: np.ndarray, votes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For examples with ``yes`` of ``votes`` samples: the probability that ``votes`` samples drawn
    again with replacement give a majority of 1 (``q``) and a tie (``t``), with K ~ Binomial(m, p),
    p = yes / m: ``q = P(K > m/2)``, ``t = P(K = m/2)`` (0 when m is odd). What the two-stage
    bootstrap draws from (:func:`majority_aggregator`).

    >>> q, t = majority_odds(np.array([2]), np.array([3]))  # p = 2/3: P(K >= 2) = 3·(2/3)²(1/3) + (2/3)³
    >>> round(float(q[0]), 4), float(t[0])
    (0.7407, 0.0)
    """
    q = np.zeros(len(yes))
    t = np.zeros(len(yes))
    for i, (k, m) in enumerate(zip(np.asarray(yes, dtype=int), np.asarray(votes, dtype=int))):
        if m <= 0:
            continue
        p = k / m
        pmf = [math.comb(m, j) * p ** j * (1 - p) ** (m - j) for j in range(m + 1)]
        q[i] = sum(pmf[j] for j in range(m + 1) if 2 * j > m)
        t[i] = pmf[m // 2] if m % 2 == 0 else 0.0
    return q, t
