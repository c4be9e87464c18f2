"""Anytime-valid confidence sequences: intervals for the mean of a bounded per-example score (and for
the paired difference of two) that may be looked at after every batch and still hold.

A fixed-sample interval read again and again as results arrive loses its guarantee (optional
stopping: look often enough and a 95% interval misses the truth far more than 5% of the time). A
confidence sequence ``C_1, C_2, ...`` holds the truth at every step at once with probability at
least ``1 - alpha``, so a decision taken the first time it clears a threshold (a gate decided, a
configuration dropped from a race) keeps its error rate.

The bound is the predictable plug-in empirical-Bernstein confidence sequence (PrPl-EB) of
Waudby-Smith and Ramdas, *Estimating means of bounded random variables by betting*, JRSS-B 86(1),
2024, Theorem 2. For values ``x_i`` in [0, 1]::

    mu_t      = (1/2 + sum_{i<=t} x_i) / (t + 1)
    sigma2_t  = (1/4 + sum_{i<=t} (x_i - mu_i)^2) / (t + 1)
    lambda_t  = min(sqrt(2 log(2/alpha) / (sigma2_{t-1} t log(1 + t))), 1/2)
    v_t       = 4 (x_t - mu_{t-1})^2,   psi(l) = (-log(1 - l) - l) / 4
    C_t       = sum lambda_i x_i / sum lambda_i  +-  (log(2/alpha) + sum v_i psi(lambda_i)) / sum lambda_i

intersected with [0, 1] and with every earlier ``C_s`` (the running intersection is a confidence
sequence too). The state is eight numbers, whatever the number of examples (constant memory);
values of another range ``[low, high]`` are rescaled to [0, 1] (a latency clipped at a stated bound);
a value that is ``None`` or NaN is left out (not defined for that example). The oracle is a
simulation with a known truth: ``tests/stats/test_sequential.py`` (reduced) and
``benchmarks/bench_sequential.py`` (1,000 sequences).

>>> cs = ConfidenceSequence(alpha=0.05)
>>> cs.update([1, 0, 1, 1, 0, 1, 1, 1, 0, 1] * 20)
>>> low, high = cs.interval()
>>> round(low, 3), round(high, 3), cs.n
(0.585, 0.813, 200)
>>> cs.above(0.5), cs.below(0.9)
(True, True)

A yes-or-no question about the mean ("is it above 0.5?", "is the leader better?") is answered
sooner by a test of its own, an e-process (:class:`Evidence`): the capital of a bettor who bets
against the null, a nonnegative supermartingale under it, so by Ville's inequality it reaches
``1/alpha`` with probability at most ``alpha`` at any time, however often it is looked at. Its
bets follow aGRAPA (the same paper, section 5.1): the Kelly bet for the mean and variance seen so far,
which for verdicts is the growth-optimal bet of the data's own law.
"""

from __future__ import annotations

import math
from typing import Iterable, Iterator

__all__ = ["ConfidenceSequence", "PairedSequence", "Evidence", "differences"]


class ConfidenceSequence:
    """The confidence sequence of the mean of values in ``[low, high]`` (PrPl-EB, module docstring).

    ``update(values)`` adds a batch (looked at after every batch, or every value: the guarantee is
    the same); ``interval()`` is the current interval ``(low, high)`` in the values' own scale (the
    whole range before any value); ``above(t)`` / ``below(t)``: the whole interval lies above /
    below ``t``, a decision that holds with probability ``1 - alpha`` whenever it is taken.
    """

    def __init__(self, alpha: float = 0.05, low: float = 0.0, high: float = 1.0, cap: float = 0.5):
        if not 0 < alpha < 1:
            raise ValueError(f"alpha: expected a number > 0 and < 1, got {alpha!r}")
        if not high > low:
            raise ValueError(f"the range [{low}, {high}] is empty")
        self.alpha, self.low, self.high, self.cap = alpha, low, high, cap
        self._log = math.log(2 / alpha)
        self.n = 0
        self._sum = 0.0          # sum of x (for mu_t)
        self._squares = 0.0      # sum of (x_i - mu_i)^2 (for sigma2_t)
        self._mu, self._sigma2 = 0.5, 0.25   # mu_0, sigma2_0
        self._weights = 0.0      # sum lambda_i
        self._weighted = 0.0     # sum lambda_i x_i
        self._penalty = 0.0      # sum v_i psi(lambda_i)
        self._lo, self._hi = 0.0, 1.0        # the running intersection, in [0, 1]

    def _scaled(self, value: float) -> float:
        x = (value - self.low) / (self.high - self.low)
        if x < -1e-12 or x > 1 + 1e-12:
            raise ValueError(f"{value!r} lies outside the range [{self.low}, {self.high}] of the sequence")
        return min(max(x, 0.0), 1.0)

    def update(self, values: Iterable[float | None]) -> None:
        """Add ``values`` in their order (``None`` or NaN: left out)."""
        for value in values:
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue
            x = self._scaled(float(value))
            t = self.n + 1
            lam = min(math.sqrt(2 * self._log / (self._sigma2 * t * math.log(1 + t))), self.cap)
            v = 4 * (x - self._mu) ** 2
            self._weights += lam
            self._weighted += lam * x
            self._penalty += v * (-math.log1p(-lam) - lam) / 4
            self.n = t
            self._sum += x
            self._mu = (0.5 + self._sum) / (t + 1)
            self._squares += (x - self._mu) ** 2
            self._sigma2 = (0.25 + self._squares) / (t + 1)
            centre = self._weighted / self._weights
            margin = (self._log + self._penalty) / self._weights
            self._lo, self._hi = max(self._lo, centre - margin), min(self._hi, centre + margin)

    def interval(self) -> tuple[float, float]:
        """The current interval, in the values' scale (an empty running intersection, which happens
        with probability below ``alpha``, is shown as the point where it closed)."""
        lo, hi = (self._lo, self._hi) if self._lo <= self._hi else ((self._lo + self._hi) / 2,) * 2
        width = self.high - self.low
        return self.low + lo * width, self.low + hi * width

    def above(self, threshold: float) -> bool:
        return self.interval()[0] > threshold

    def below(self, threshold: float) -> bool:
        return self.interval()[1] < threshold


class PairedSequence(ConfidenceSequence):
    """The confidence sequence of the mean paired difference ``b - a`` of two scores in ``[low, high]``
    measured on the same examples (a run against its baseline, a configuration against the leader).

    >>> d = PairedSequence(alpha=0.05)
    >>> d.update_pairs([0.9] * 300, [0.6] * 300)
    >>> d.below(0), round(d.interval()[1], 3)
    (True, -0.251)
    """

    def __init__(self, alpha: float = 0.05, low: float = 0.0, high: float = 1.0, cap: float = 0.5):
        width = high - low
        super().__init__(alpha, -width, width, cap)

    def update_pairs(self, a: Iterable[float | None], b: Iterable[float | None]) -> None:
        """Add the pairs ``(a_i, b_i)``; a pair missing either side is left out."""
        self.update(differences(a, b))


def differences(a: Iterable[float | None], b: Iterable[float | None]) -> Iterator[float | None]:
    """``b_i - a_i`` pair by pair (``None`` where either side is ``None`` or NaN)."""
    return (None if x is None or y is None or (isinstance(x, float) and math.isnan(x))
            or (isinstance(y, float) and math.isnan(y)) else y - x for x, y in zip(a, b))


class Evidence:
    """An e-process for the null "the mean of values in ``[low, high]`` is at most ``null``" (``side``
    ``"above"``: evidence that it is above) or "at least ``null``" (``side`` ``"below"``): the capital
    ``K_t = prod (1 + lambda_i s (x_i - null))`` (``s`` = +1 or -1) of predictable bets ``lambda_i``
    (aGRAPA: ``m / (v + m^2)`` of the centred values seen before, clipped to ``[0, cap / reach]``, where
    ``reach`` is how far a value can go against the bet, so the capital never reaches 0).
    :attr:`rejected` once ``K_t >= 1/alpha``: wrong with probability at most ``alpha``, at any time.

    >>> e = Evidence(alpha=0.01, null=0.0, low=-1.0, high=1.0)
    >>> e.update([1, 0, 1, 0, -1, 1, 1, 0, 1, 0] * 6)
    >>> e.rejected, round(e.value, 1) > 100
    (True, True)
    """

    def __init__(self, alpha: float = 0.05, null: float = 0.0, low: float = 0.0, high: float = 1.0,
                 side: str = "above", cap: float = 0.5):
        if not 0 < alpha < 1:
            raise ValueError(f"alpha: expected a number > 0 and < 1, got {alpha!r}")
        if side not in ("above", "below") or not low <= null <= high or not high > low:
            raise ValueError(f"expected side above or below and low <= null <= high, got {side!r}, {low}, {null}, {high}")
        self.alpha, self.null, self.low, self.high, self.side = alpha, null, low, high, side
        self._sign = 1.0 if side == "above" else -1.0
        reach = (null - low) if side == "above" else (high - null)  # the largest loss of a unit bet
        self._most = cap / reach if reach > 0 else math.inf
        self.n = 0
        self._sum = 0.0      # sum of the centred values s (x - null)
        self._squares = 0.0  # sum of their squares
        self.log_value = 0.0  # log K_t

    def update(self, values: Iterable[float | None]) -> None:
        """Add ``values`` in their order (``None`` or NaN: left out)."""
        for value in values:
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue
            if not self.low - 1e-12 <= value <= self.high + 1e-12:
                raise ValueError(f"{value!r} lies outside the range [{self.low}, {self.high}] of the evidence")
            y = self._sign * (float(value) - self.null)
            if self.n:
                m = self._sum / self.n
                v = max(self._squares / self.n - m * m, 1e-4)
                bet = min(max(m / (v + m * m), 0.0), self._most)
                self.log_value += math.log1p(bet * y)
            self.n += 1
            self._sum += y
            self._squares += y * y

    @property
    def value(self) -> float:
        """The capital ``K_t`` (the evidence against the null; 1 before any value)."""
        return math.exp(min(self.log_value, 700.0))

    @property
    def rejected(self) -> bool:
        return self.log_value >= math.log(1 / self.alpha)
