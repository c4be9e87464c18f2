"""A race of configurations (:mod:`ragmem.stats.racing`) against simulations with a known truth: a
configuration within the indifference zone of the best survives in at least 95% of the races, the race
spends a fraction of the grid's judging when the configurations are spread out (the full 1,000 races:
``benchmarks/bench_race.py``); the e-process behind the decisions keeps its false-alarm rate; the
stops, the ties and the raced constraints."""

from __future__ import annotations

import numpy as np
import pytest

from ragmem.stats.racing import Race, raced_bound, simulate
from ragmem.stats.sequential import Evidence

RACES = 60


def _spread(spread: float, k: int = 18) -> list[float]:
    return list(np.linspace(0.5 + spread / 2, 0.5 - spread / 2, k))


@pytest.mark.parametrize("spread, most", [(0.3, 0.45), (0.5, 0.32)])
def test_a_race_keeps_one_within_indifference_of_the_best_and_spends_a_fraction_of_the_grid(spread, most):
    means = _spread(spread)
    shares, kept = [], 0
    for seed in range(RACES):
        race = simulate(means, 1000, seed)
        shares.append(sum(race.judged(i) for i in range(18)) / 18_000)
        kept += any(means[i] >= max(means) - 0.02 for i in race.candidates())
    assert kept / RACES >= 0.95
    assert np.median(shares) <= most  # (1,000 races: 0.39 at spread 0.3, 0.26 at 0.5; benchmarks/README.md)


def test_equal_configurations_are_seldom_dropped():
    """All six equal, so each is the best: each is dropped in at most alpha of the races (its five tests
    at alpha / 5), and some are always left."""
    dropped = np.zeros(6)
    for seed in range(RACES):
        race = simulate([0.6] * 6, 600, seed)
        assert race.candidates()
        dropped += [i not in race.candidates() for i in range(6)]
    assert (dropped / RACES).max() <= 0.05


def test_the_evidence_keeps_its_false_alarm_rate_at_every_look():
    """Under the null (mean exactly at it), the e-process reaches 1/alpha in <= alpha of the streams, looked
    at after every value; a true effect is found."""
    rng = np.random.default_rng(0)
    alarms = 0
    for _ in range(400):
        e = Evidence(alpha=0.05, null=0.5)
        for x in (rng.random(500) < 0.5).astype(float):
            e.update([x])
            if e.rejected:
                alarms += 1
                break
    assert alarms / 400 <= 0.05
    found = Evidence(alpha=0.05, null=0.5)
    found.update((rng.random(400) < 0.65).astype(float).tolist())
    assert found.rejected
    below = Evidence(alpha=0.05, null=0.5, side="below")
    below.update((rng.random(400) < 0.35).astype(float).tolist())
    assert below.rejected and below.value > 20


def test_a_clearly_worse_configuration_stops_early_and_names_its_leader():
    rng = np.random.default_rng(3)
    race = Race(2, alpha=0.05)
    while not race.over:
        race.add(0, (rng.random(20) < 0.8).astype(float).tolist())
        race.add(1, (rng.random(20) < 0.4).astype(float).tolist())
        race.decide()
    stop = race.stops[1]
    assert stop.reason == "worse than 0" and stop.after <= 100 and stop.evidence >= 20
    assert stop.versus_leader is not None and race.stops[0].reason == "survived"
    low, high = stop.interval
    assert low <= 0.4 <= high


def test_minimize_races_the_other_way():
    rng = np.random.default_rng(4)
    race = Race(2, goal="minimize")
    for _ in range(20):
        race.add(0, (rng.random(20) < 0.8).astype(float).tolist())
        race.add(1, (rng.random(20) < 0.3).astype(float).tolist())
        race.decide()
    assert race.stops[0].reason == "worse than 1"


def test_a_violated_quantile_constraint_stops_the_slow_configuration():
    bound = raced_bound("latency_p95", high=0.5)
    assert bound.kind == "exceeds" and bound.share == pytest.approx(0.05)
    assert raced_bound("avg_latency", high=0.5) is None
    assert raced_bound("faithfulness", low=0.7, score=True).kind == "mean"
    rng = np.random.default_rng(5)
    race = Race(2, bounds=[bound])
    for _ in range(10):
        race.add(0, [1.0] * 20, {"latency_p95": rng.uniform(0.1, 0.4, 20).tolist()})
        race.add(1, [1.0] * 20, {"latency_p95": rng.uniform(0.3, 0.9, 20).tolist()})  # 2/3 slower than 0.5
        race.decide()
        if race.over:
            break
    assert race.stops[1].reason == "constraint latency_p95" and race.stops[1].after <= 60
    assert race.stops[0].reason == "survived"


def test_configurations_equal_to_within_the_indifference_end_tied():
    race = Race(3, indifference=0.2)
    for _ in range(50):
        for i in race.running:
            race.add(i, [0.5] * 20)
        race.decide()
        if race.over:
            break
    assert race.ended == "tied" and {s.reason for s in race.stops.values()} == {"tied"}
    assert race.candidates() == [0, 1, 2]


def test_the_race_ended_from_outside_and_missing_values():
    race = Race(2)
    race.add(0, [1.0, None, float("nan")])
    race.add(1, [0.0, 1.0, None])
    race.decide()
    assert race.judged(0) == 3 and race.mean(0) == 1.0 and race.mean(1) == 0.5
    stops = race.end("budget")
    assert {s.reason for s in stops.values()} == {"budget"} and race.over and race.candidates() == [0, 1]
    with pytest.raises(ValueError):
        Race(2, goal="best")
