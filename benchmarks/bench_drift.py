"""Does the monitor across windows (``gates.<metric>.drift``, :mod:`ragmem.stats.drift`) catch a
sustained drop soon, and does it stay quiet when nothing changes? Simulated windows with a known
truth (:func:`ragmem.stats.drift.simulate`), looked at after every window as a schedule does.

For each scenario: the share of ``--runs`` runs whose monitor alarmed within 6 windows of a drop of
``max_drop`` that starts right after the 3 baseline windows, and (``late``) after 20 windows; the
median windows it took; the share of ``--runs`` 100-window runs with no change that ever alarmed
(the bound: ``alpha`` = 0.05); and, for scale, the power of the one fixed-sample test an oracle that
knew when the drop started would run after 6 windows (one-sided z-test at 0.05, the windows before
against the 6 after, spread known): no monitor that looks every window can beat it by much::

    python benchmarks/bench_drift.py            # 500 runs per scenario (~1 min)
    python benchmarks/bench_drift.py --runs 100

``tests/stats/test_drift.py`` runs 150 (drop) and 60 (no change) runs of the first scenario.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragmem.stats.drift import first_alarm, simulate  # noqa: E402

#: (label, level, drop, simulate's keywords)
SCENARIOS = [
    ("graded scores, 4 turns a session", 0.85, 0.10, {"turns": 4, "turn_sd": 0.2}),
    ("binary verdicts, 3 turns a session", 0.85, 0.10, {"turns": 3, "turn_sd": None}),
    ("binary verdicts, 3 turns: a drop of 0.20", 0.85, 0.20, {"turns": 3, "turn_sd": None}),
    ("binary verdicts, 2 turns: 0.905 -> 0.667", 0.905, 0.24, {"turns": 2, "turn_sd": None}),
]


def _sd(rng, level, kw) -> float:
    w = simulate(rng, level, 0.0, 10**6, 300, **kw)
    return math.sqrt(sum(x.m2 for x in w) / sum(x.units - 1 for x in w))


def _oracle_power(sd: float, drop: float, before: int, after: int = 6, sessions: int = 10) -> float:
    se = sd * math.sqrt(1 / (before * sessions) + 1 / (after * sessions))
    return 0.5 * math.erfc((1.6449 - drop / se) / math.sqrt(2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(f"{args.runs} runs per scenario; 10 sessions a window, 3 baseline windows, alpha 0.05, max_drop = the drop")
    print(f"{'scenario':<46} {'sd':>5} {'within 6':>9} {'median':>7} {'late':>6} {'oracle':>7} {'false/100':>10}")
    for label, level, drop, kw in SCENARIOS:
        row = []
        for start in (3, 20):
            took = []
            for _ in range(args.runs):
                at = first_alarm(simulate(rng, level, drop, start, start + 6, **kw), drop)
                took.append(None if at is None or at < start else at - start + 1)
            row.append((sum(t is not None for t in took) / args.runs, [t for t in took if t is not None]))
        quiet = sum(first_alarm(simulate(rng, level, 0.0, 10**6, 100, **kw), drop) is not None
                    for _ in range(args.runs)) / args.runs
        sd = _sd(rng, level, kw)
        (soon, took), (late, _) = row
        print(f"{label:<46} {sd:5.3f} {soon:9.3f} {statistics.median(took) if took else float('nan'):7.1f} "
              f"{late:6.3f} {_oracle_power(sd, drop, 3):7.3f} {quiet:10.3f}")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
