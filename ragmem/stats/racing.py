"""A race of configurations: each judged on the same examples in the same order, a batch at a time,
and dropped as soon as it is worse than the leader with confidence, so the judge is not paid for
configurations that have already lost.

After each round (every configuration still in the race has added the same batch) :meth:`Race.decide`
looks at anytime-valid confidence sequences (:mod:`ragmem.stats.sequential`):

- **worse**: a configuration that is worse than the leader (the survivor with the best mean so far)
  with confidence stops (``worse than <leader>``): the e-process of their paired difference
  (:class:`ragmem.stats.sequential.Evidence`, the test form of the difference's confidence sequence at
  0, which decides sooner) has reached ``1/alpha_each``;
- **constraint**: a configuration whose raced constraint is violated with confidence stops
  (``constraint <metric>``; an e-process again): a bound on the mean of a per-example score, or a
  bound on a latency quantile (``latency_p95 max 0.5``: the share of examples slower than 0.5 s is
  above 5% with confidence);
- **tied**: once every survivor's difference to the leader lies within ``indifference`` of 0 with
  confidence, the race ends and every survivor is ``tied`` (the sweep's ``tie_break`` chooses among them);
- **one left**: the race ends with that one ``survived``; the caller ends it too when the data or the
  budget run out (:meth:`Race.end`).

Error control. Each test runs at ``alpha / (k - 1 + c)`` (``k`` configurations, ``c`` raced constraints):
the best configuration can only be dropped by one of its ``k - 1`` paired tests or its ``c``
constraint tests rejecting wrongly, so it survives with probability at least ``1 - alpha``, however many
times the race looked (the tests hold at every step at once). The leader changes as the means move;
a pair's test and interval are built from the stored values the first time the pair is compared,
then updated batch by batch. The oracle is a simulation with a known truth: ``tests/stats/test_racing.py``
(reduced) and ``benchmarks/bench_race.py`` (1,000 races of 18 configurations x 1,000 examples).

>>> import random
>>> rng = random.Random(1)
>>> race = Race(3, alpha=0.05)
>>> for _ in range(30):                                   # rounds of 20 examples
...     for i, p in enumerate((0.9, 0.5, 0.85)):
...         race.add(i, [float(rng.random() < p) for _ in range(20)])
...     _ = race.decide()
...     if race.over: break
>>> race.stops[1].reason, race.stops[1].after < 200, 0 in race.candidates()
('worse than 0', True, True)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ragmem.stats.sequential import ConfidenceSequence, differences, Evidence, PairedSequence

__all__ = ["Race", "Stop", "RacedBound", "raced_bound", "WORSE", "CONSTRAINT", "TIED", "SURVIVED", "BUDGET"]

#: why a configuration left the race (``race.reason``); ``worse than <name>`` and ``constraint <metric>``
#: name the configuration and the metric
WORSE, CONSTRAINT, TIED, SURVIVED, BUDGET = "worse than", "constraint", "tied", "survived", "budget"
_QUANTILE = re.compile(r"^(?:\w+_)?latency_p(\d\d)$")


@dataclass(frozen=True)
class RacedBound:
    """A constraint the race can test example by example: ``kind`` ``mean`` (the mean of the per-example
    values, in ``[low, high]``, against ``min`` / ``max``) or ``exceeds`` (the share of examples whose
    value exceeds ``max`` against ``share``: a quantile bound, ``latency_p95 max 0.5`` is at most 5% of
    examples slower than 0.5 s)."""

    metric: str
    kind: str
    min: float | None = None
    max: float | None = None
    share: float | None = None

    def indicator(self, value: float | None) -> float | None:
        """The value the sequence follows: the value itself, or (``exceeds``) whether it exceeds ``max``."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        return float(value > self.max) if self.kind == "exceeds" else float(value)  # type: ignore[operator]

    def tests(self, alpha: float, low: float, high: float) -> list[Evidence]:
        """The e-processes whose rejection says the bound is violated (one per side bounded)."""
        if self.kind == "exceeds":
            return [Evidence(alpha, self.share, 0.0, 1.0, "above")]  # type: ignore[arg-type]
        return ([Evidence(alpha, self.max, low, high, "above")] if self.max is not None else []) + \
            ([Evidence(alpha, self.min, low, high, "below")] if self.min is not None else [])


def raced_bound(metric: str, low: float | None = None, high: float | None = None,
                score: bool = False) -> RacedBound | None:
    """The race's test of the constraint ``metric`` in ``[low, high]``: a latency quantile's upper bound
    (``latency_p95``, ``retrieval_latency_p99``), or either bound of a score in [0, 1] (``score``: the
    metric is the mean of a per-example column); ``None`` for any other (checked once the race is over)."""
    quantile = _QUANTILE.match(metric)
    if quantile and high is not None and low is None:
        return RacedBound(metric, "exceeds", max=high, share=1 - int(quantile.group(1)) / 100)
    if score:
        return RacedBound(metric, "mean", min=low, max=high)
    return None


@dataclass
class Stop:
    """Why and when a configuration left the race: ``after`` examples judged, ``reason`` (``worse than
    <i>``, ``constraint <metric>``, ``tied``, ``survived``, ``budget``), its mean's interval and its
    paired difference to the leader at that moment (``None`` for the leader itself)."""

    after: int
    reason: str
    interval: tuple[float, float]
    versus_leader: tuple[float, float] | None = None
    leader: int | None = None
    evidence: float | None = None  # the e-value that stopped it (worse, constraint), against 1/alpha_each


@dataclass
class _Entry:
    mean_cs: ConfidenceSequence                          # the objective's mean
    bounds: dict[str, list[Evidence]]                    # each raced constraint's tests
    values: list[float] = field(default_factory=list)   # the objective, example by example (NaN: not defined)
    total: float = 0.0
    defined: int = 0

    @property
    def mean(self) -> float | None:
        return self.total / self.defined if self.defined else None


class Race:
    """The race of ``n`` configurations on an objective in ``[low, high]`` (``goal`` ``maximize`` or
    ``minimize``), with the raced constraints ``bounds`` (module docstring). Feed each survivor's batch
    with :meth:`add`, then call :meth:`decide` once per round."""

    def __init__(self, n: int, alpha: float = 0.05, indifference: float = 0.02, goal: str = "maximize",
                 low: float = 0.0, high: float = 1.0, bounds: Sequence[RacedBound] = ()):
        if n < 1:
            raise ValueError("a race needs at least one configuration")
        if goal not in ("maximize", "minimize"):
            raise ValueError(f"goal: expected maximize or minimize, got {goal!r}")
        self.n, self.alpha, self.indifference, self.goal = n, alpha, indifference, goal
        self.low, self.high, self.bound_tests = low, high, tuple(bounds)
        self.alpha_each = alpha / max(n - 1 + len(self.bound_tests), 1)
        self._sign = 1.0 if goal == "maximize" else -1.0
        self._entries = [_Entry(ConfidenceSequence(self.alpha_each, low, high),
                                {b.metric: b.tests(self.alpha_each, low, high) for b in self.bound_tests})
                         for _ in range(n)]
        # per (leader, i): the interval and the test of ``leader - i``, and how many pairs each was fed
        self._pairs: dict[tuple[int, int], tuple[PairedSequence, list[int]]] = {}
        self._evidence: dict[tuple[int, int], tuple[Evidence, list[int]]] = {}
        self.stops: dict[int, Stop] = {}
        self.rounds = 0
        self.ended: str | None = None  # why the race is over: "one left", "tied", or what end() was told

    # -- feeding -----------------------------------------------------------------------------------

    def add(self, i: int, objective: Sequence[float | None],
            bounds: Mapping[str, Sequence[float | None]] | None = None) -> None:
        """Configuration ``i``'s next batch: its objective per example (``None``/NaN: not defined, left
        out of its sequences), and per raced constraint its metric's per-example values."""
        entry = self._entries[i]
        for value in objective:
            x = math.nan if value is None else float(value)
            entry.values.append(x)
            if not math.isnan(x):
                entry.total += x
                entry.defined += 1
        entry.mean_cs.update(objective)
        for test in self.bound_tests:
            given = [test.indicator(v) for v in (bounds or {}).get(test.metric, ())]
            for evidence in entry.bounds[test.metric]:
                evidence.update(given)

    # -- reading -----------------------------------------------------------------------------------

    @property
    def running(self) -> list[int]:
        """The configurations still judged: not stopped for any reason."""
        return [i for i in range(self.n) if i not in self.stops]

    @property
    def over(self) -> bool:
        return self.ended is not None

    def judged(self, i: int) -> int:
        """Examples configuration ``i`` has been judged on."""
        return len(self._entries[i].values)

    def mean(self, i: int) -> float | None:
        return self._entries[i].mean

    def interval(self, i: int) -> tuple[float, float]:
        """The anytime-valid interval of configuration ``i``'s mean."""
        return self._entries[i].mean_cs.interval()

    def leader(self) -> int | None:
        """The running configuration with the best mean so far (equal means: the earlier one)."""
        running = [i for i in self.running if self.mean(i) is not None]
        if not running:
            return None
        return max(running, key=lambda i: (self._sign * self.mean(i), -i))  # type: ignore[operator]

    def versus(self, leader: int, i: int) -> tuple[float, float]:
        """The interval of the mean difference ``leader - i`` on the examples both were judged on."""
        return self._fed(self._pairs, leader, i, lambda: PairedSequence(self.alpha_each, self.low, self.high)).interval()

    def evidence(self, leader: int, i: int) -> Evidence:
        """The e-process of "``leader`` is better than ``i``" on the examples both were judged on."""
        width = self.high - self.low
        side = "above" if self._sign > 0 else "below"
        return self._fed(self._evidence, leader, i, lambda: Evidence(self.alpha_each, 0.0, -width, width, side))

    def _fed(self, store: dict, leader: int, i: int, make):
        """The pair's sequence or test from ``store`` (made by ``make`` the first time the pair is compared),
        fed the differences ``leader - i`` it has not seen, on the examples both were judged on."""
        found = store.get((leader, i))
        if found is None:
            found = store[(leader, i)] = (make(), [0])
        sequence, fed = found
        a, b = self._entries[i].values, self._entries[leader].values
        upto = min(len(a), len(b))
        if upto > fed[0]:
            sequence.update(differences(a[fed[0]:upto], b[fed[0]:upto]))
            fed[0] = upto
        return sequence

    # -- deciding ----------------------------------------------------------------------------------

    def _stop(self, i: int, reason: str, leader: int | None = None, evidence: float | None = None) -> Stop:
        versus = self.versus(leader, i) if leader is not None and leader != i else None
        stop = self.stops[i] = Stop(self.judged(i), reason, self.interval(i), versus,
                                    leader if leader != i else None, evidence)
        return stop

    def decide(self) -> dict[int, Stop]:
        """After a round: the configurations that stop now, and why (the race may end: :attr:`over`)."""
        self.rounds += 1
        stopped: dict[int, Stop] = {}
        if self.over:
            return stopped
        for i in self.running:  # a constraint violated with confidence
            violated = [(t.metric, e.value) for t in self.bound_tests for e in self._entries[i].bounds[t.metric]
                        if e.rejected]
            if violated:
                stopped[i] = self._stop(i, f"{CONSTRAINT} {violated[0][0]}", evidence=violated[0][1])
        leader = self.leader()
        if leader is not None:
            for i in self.running:
                if i == leader:
                    continue
                evidence = self.evidence(leader, i)
                if evidence.rejected:
                    stopped[i] = self._stop(i, f"{WORSE} {leader}", leader, evidence.value)
        running = self.running
        if len(running) == 1:
            self.ended = "one left"
            stopped[running[0]] = self._stop(running[0], SURVIVED)
        elif leader is not None and len(running) > 1 and all(
                -self.indifference < lo and hi < self.indifference
                for lo, hi in (self.versus(leader, i) for i in running if i != leader)):
            self.ended = TIED
            for i in running:
                stopped[i] = self._stop(i, TIED, leader)
        elif not running:
            self.ended = "none left"
        return stopped

    def retire(self, i: int, reason: str) -> Stop:
        """Configuration ``i`` leaves the race from outside (its data ran out: ``survived``; its run failed);
        the last one to leave ends the race."""
        stop = self._stop(i, reason, self.leader())
        if not self.running:
            self.ended = self.ended or SURVIVED
        return stop

    def end(self, reason: str = SURVIVED) -> dict[int, Stop]:
        """The race ended from outside (the data ran out: ``survived``; the budget was spent: ``budget``):
        every configuration still running stops with ``reason``."""
        leader = self.leader()
        stopped = {i: self._stop(i, reason, leader) for i in self.running}
        self.ended = self.ended or reason
        return stopped

    def candidates(self) -> list[int]:
        """The configurations the race did not rule out: survivors, the tied, those the budget stopped."""
        return [i for i, s in sorted(self.stops.items()) if s.reason in (SURVIVED, TIED, BUDGET)] + \
            [i for i in self.running]


def simulate(means: Sequence[float], examples: int, seed: int, batch: int = 20, alpha: float = 0.05,
             indifference: float = 0.02, correlation: float = 0.5) -> Race:
    """One race with a known truth (the oracle of this module): binary verdicts of configurations whose
    pass rates are ``means``, sharing each example's difficulty (a Gaussian copula with ``correlation``
    between two configurations' verdicts on an example, as configurations of one agent share hard
    questions), raced ``batch`` examples at a time until it ends or ``examples`` run out."""
    import numpy as np
    from statistics import NormalDist

    rng = np.random.default_rng(seed)
    cuts = np.array([NormalDist().inv_cdf(m) for m in means])[:, None]
    shared = rng.standard_normal(examples)[None, :]
    own = rng.standard_normal((len(means), examples))
    verdicts = (math.sqrt(correlation) * shared + math.sqrt(1 - correlation) * own < cuts).astype(float)
    race = Race(len(means), alpha=alpha, indifference=indifference)
    for start in range(0, examples, batch):
        for i in race.running:
            race.add(i, verdicts[i, start:start + batch].tolist())
        race.decide()
        if race.over:
            break
    if not race.over:
        race.end(SURVIVED)
    return race
