"""A sustained drop across windows of traffic: evidence that accumulates night after night, where one
window alone is too small to show it (``gates.<metric>.drift``, :mod:`ragmem.run.drift`).

Each window is summarised by its *units* (the sessions of its traces, or its traces when they have
none): how many, the mean of their scores and the sum of squared deviations from it
(:class:`Window`, :func:`window_of`). The monitor asks, after every window ``t``: did the metric drop
by ``delta`` (``max_drop``) at some window ``j`` and stay down since? For a change starting at ``j``,
the windows before ``j`` (at least ``baseline_windows`` of them) are the baseline and the windows
``j..t`` the stretch after; ``D_j`` is the baseline's unit mean minus the stretch's (its rise for a
lower-is-better metric) and ``tau_j^2 = sigma^2 (1/n_pre + 1/n_post)``. The likelihood ratio of "down
by ``delta`` from ``j``" against "no change", for Gaussian unit means of a common ``sigma`` and
with the unknown level integrated out (the test is invariant to a shift of every window alike), is

    L_j(t) = exp((delta * D_j - delta^2 / 2) / tau_j^2)

and the monitor's evidence is the mixture over change points: the e-detector construction of Shin,
Ramdas & Rinaldo (2023, "E-detectors: a nonparametric framework for sequential change detection"),
each change point's e-process weighted by a prior over change points, so that Ville's inequality
bounds a false alarm over the whole horizon (not only the average run length before one):

    M(t) = sum_j w_j L_j(t),    w_j = 1 / (k (k + 1)),  k = j - baseline_windows  (the weights sum to 1)

Under no change ``M(t) + sum_{j > t} w_j`` is a nonnegative martingale that starts at 1, so by
Ville's inequality the monitor alarms (``M(t) >= 1 / alpha``) *at any window, ever* with probability
at most ``alpha``: not a false-alarm rate per window, a bound over the whole life of the schedule.
``sigma`` is the pooled within-window standard deviation of the units (all windows; at least
:data:`SIGMA_FLOOR`): a plug-in, so the bound is that of the Gaussian model with its variance
estimated, which ``benchmarks/bench_drift.py`` checks by simulation (bounded scores, sessions of
several turns): false alarms over 100 windows, and how soon a drop is seen.

Limits, said where they apply: a change is looked for only after ``baseline_windows`` windows; the
later a change starts, the more its prior weight costs (``log(k (k + 1))`` of evidence); a drop
smaller than ``delta / 2`` accumulates evidence slowly, a drop of ``delta`` or more quickly; after
a real drop the monitor keeps alarming until the level comes back or ``drift.since`` moves past it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

__all__ = ["SIGMA_FLOOR", "Verdict", "Window", "detect", "first_alarm", "simulate", "window_of"]

#: the least spread assumed of the units' scores (a window of identical scores would make any
#: difference infinitely strong evidence)
SIGMA_FLOOR = 0.01


@dataclass(frozen=True)
class Window:
    """One window's units: how many, their mean score, the sum of squared deviations from it."""

    units: int
    mean: float
    m2: float

    def as_list(self) -> list[float]:
        return [self.units, self.mean, self.m2]

    @classmethod
    def of_list(cls, values: Sequence[float]) -> "Window":
        units, mean, m2 = values
        if not (isinstance(units, (int, float)) and units >= 1 and math.isfinite(mean) and math.isfinite(m2) and m2 >= 0):
            raise ValueError(f"not a window's [units, mean, m2]: {list(values)!r}")
        return cls(int(units), float(mean), float(m2))


def window_of(scores: Iterable[float], units: Iterable[object] | None = None) -> Window | None:
    """A window of per-example ``scores`` grouped by ``units`` (a session id per example; ``None``,
    missing or NaN: the example is a unit of its own). Scores that are null are left out; ``None``
    when no score is left."""
    values = np.asarray(list(scores), dtype=float)
    keys = list(units) if units is not None else [None] * len(values)
    groups: dict[object, list[float]] = {}
    for i, (v, k) in enumerate(zip(values, keys)):
        if math.isnan(v):
            continue
        lone = k is None or (isinstance(k, float) and math.isnan(k)) or k == ""
        groups.setdefault(("\0", i) if lone else k, []).append(float(v))
    if not groups:
        return None
    means = np.array([sum(g) / len(g) for g in groups.values()])
    return Window(len(means), float(means.mean()), float(((means - means.mean()) ** 2).sum()))


@dataclass(frozen=True)
class Verdict:
    """The monitor after its last window: the evidence ``M(t)`` and its bar ``1 / alpha``; the change
    point that weighs most (its drop, over how many of the last windows); ``None`` figures when no
    change could be looked for yet (fewer than ``baseline_windows + 1`` windows)."""

    evidence: float
    threshold: float
    windows: int
    drop: float | None = None
    over: int | None = None
    sigma: float | None = None

    @property
    def alarmed(self) -> bool:
        return self.evidence >= self.threshold


def detect(windows: Sequence[Window], max_drop: float, alpha: float = 0.05, baseline_windows: int = 3,
           lower_is_better: bool = False) -> Verdict:
    """The monitor's :class:`Verdict` after ``windows`` (oldest first): ``M(t)`` of the module's
    docstring for a drop of ``max_drop`` (a rise, ``lower_is_better``)."""
    threshold = 1 / alpha
    t = len(windows)
    if t <= baseline_windows:
        return Verdict(0.0, threshold, t)
    n = np.array([w.units for w in windows], dtype=float)
    sums = np.array([w.units * w.mean for w in windows])
    free = float((n - 1).sum())
    sigma = max(math.sqrt(sum(w.m2 for w in windows) / free) if free > 0 else 0.0, SIGMA_FLOOR)
    cn, cs = np.cumsum(n), np.cumsum(sums)
    j = np.arange(baseline_windows, t)  # the first window of the stretch after a change (0-based)
    n_pre, s_pre = cn[j - 1], cs[j - 1]
    n_post, s_post = cn[-1] - n_pre, cs[-1] - s_pre
    drop = s_pre / n_pre - s_post / n_post
    if lower_is_better:
        drop = -drop
    tau2 = sigma ** 2 * (1 / n_pre + 1 / n_post)
    k = j - baseline_windows + 1
    terms = -np.log(k * (k + 1.0)) + (max_drop * drop - max_drop ** 2 / 2) / tau2
    top = float(terms.max())
    log_m = top + math.log(float(np.exp(terms - top).sum()))
    best = int(terms.argmax())
    return Verdict(math.exp(min(log_m, 700.0)), threshold, t, float(drop[best]), int(t - j[best]), sigma)


def simulate(rng: np.random.Generator, level: float, drop: float, start: int, n_windows: int, *,
             sessions: int = 10, turns: int = 4, turn_sd: float | None = 0.2, session_sd: float = 0.05) -> list[Window]:
    """Windows with a known truth (the oracle of the tests and ``benchmarks/bench_drift.py``):
    ``sessions`` sessions a window of ``turns`` graded scores each, ``level`` + a session's effect
    (sd ``session_sd``) + a turn's noise (sd ``turn_sd``), clipped to [0, 1]; from window ``start``
    (0-based) on, ``level - drop``. ``turn_sd=None``: binary verdicts instead, passing with the
    session's chance."""
    out = []
    for t in range(n_windows):
        mu = level - (drop if t >= start else 0.0)
        p = np.clip(mu + rng.normal(0, session_sd, sessions), 0, 1)
        if turn_sd is None:
            scores = rng.binomial(turns, p) / turns
        else:
            scores = np.clip(p[:, None] + rng.normal(0, turn_sd, (sessions, turns)), 0, 1).mean(axis=1)
        out.append(Window(sessions, float(scores.mean()), float(((scores - scores.mean()) ** 2).sum())))
    return out


def first_alarm(windows: Sequence[Window], max_drop: float, alpha: float = 0.05, baseline_windows: int = 3) -> int | None:
    """The first window (0-based) after which the monitor alarms, looking after every window as a
    schedule does; ``None``: it never did."""
    for t in range(baseline_windows + 1, len(windows) + 1):
        if detect(windows[:t], max_drop, alpha, baseline_windows).alarmed:
            return t - 1
    return None
