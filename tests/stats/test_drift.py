"""The monitor across windows (:mod:`ragmem.stats.drift`) against simulations with a known truth: a
sustained drop of 0.10 at 10 sessions a window alarms within 6 windows in at least 80% of the runs,
and with no change at most 5% of 100-window runs ever alarm (the full 500 runs:
``benchmarks/bench_drift.py``); a window's units; the direction of a lower-is-better metric."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragmem.stats.drift import SIGMA_FLOOR, Window, detect, first_alarm, simulate, window_of


def test_a_drop_of_max_drop_alarms_within_six_windows_in_at_least_80_percent():
    rng = np.random.default_rng(3)
    caught = 0
    for _ in range(150):
        windows = simulate(rng, 0.85, 0.10, start=3, n_windows=9)  # 3 baseline windows, then 6 down by 0.10
        at = first_alarm(windows, 0.10)
        assert at is None or at >= 3  # (a false alarm before the drop would count against it)
        caught += at is not None
    assert caught / 150 >= 0.80


def test_no_change_alarms_in_at_most_5_percent_of_100_window_runs():
    rng = np.random.default_rng(4)
    alarms = sum(first_alarm(simulate(rng, 0.85, 0.0, start=10**6, n_windows=100), 0.10) is not None
                 for _ in range(60))
    assert alarms / 60 <= 0.05


def test_with_gaussian_units_of_known_spread_the_bound_is_ville_s():
    """The model the evidence is exact for (Gaussian unit means, the spread known to the monitor:
    ``m2`` as the truth gives it): over 100 windows, the share of runs that ever alarm stays under
    alpha, with margin for the simulation's own noise."""
    rng = np.random.default_rng(5)

    def run() -> bool:
        windows = [Window(10, float(rng.normal(0.7, 0.1 / math.sqrt(10))), 0.1 ** 2 * 9) for _ in range(100)]
        return first_alarm(windows, 0.10, alpha=0.1) is not None

    assert sum(run() for _ in range(100)) / 100 <= 0.1 + 0.05


def test_the_verdict_names_the_change_that_weighs_most():
    flat = [Window(10, 0.9, 0.09)] * 5
    low = [Window(10, 0.7, 0.09)] * 3
    v = detect(flat + low, 0.10)
    assert v.alarmed and v.threshold == 20 and v.over == 3 and v.drop == pytest.approx(0.2)
    assert not detect(flat + flat, 0.10).alarmed
    assert detect(flat[:3], 0.10) .drop is None and detect(flat[:3], 0.10).evidence == 0  # nothing looked for yet
    # a lower-is-better metric: a rise is the change to catch, a fall is not
    assert detect(low[:3] + flat, 0.10, lower_is_better=True).alarmed
    assert not detect(flat[:3] + low, 0.10, lower_is_better=True).alarmed


def test_a_window_is_its_sessions():
    w = window_of([1.0, 0.0, 1.0, float("nan"), 0.5], ["a", "a", "b", "b", None])
    assert w.units == 3  # a: 0.5, b: 1.0 (its null left out), the lone trace: 0.5
    assert w.mean == pytest.approx(2 / 3) and w.m2 == pytest.approx(1 / 6)
    assert window_of([float("nan")], None) is None
    assert window_of([1.0, 0.0], None).units == 2


def test_identical_scores_do_not_divide_by_zero():
    v = detect([Window(10, 1.0, 0.0)] * 4 + [Window(10, 0.95, 0.0)], 0.10)
    assert v.sigma == SIGMA_FLOOR and math.isfinite(v.evidence)


@pytest.mark.parametrize("bad", [[0, 0.5, 0.1], [3, float("nan"), 0.1], [3, 0.5, -1], ["3", 0.5, 0.1]])
def test_a_kept_window_that_is_not_one_is_refused(bad):
    with pytest.raises((ValueError, TypeError)):
        Window.of_list(bad)
