"""Does a race keep the best configuration, and how much of the grid's judging does it spend? The
oracle of :mod:`ragmem.stats.racing` at full size.

For each spread of the objective (the configurations' pass rates equally spaced over it, centred on
0.5), ``--races`` simulated races of ``--configs`` configurations x ``--examples`` examples with a
known truth (:func:`ragmem.stats.racing.simulate`: binary verdicts sharing each example's difficulty,
``--correlation`` between two configurations' verdicts on an example), looked at every ``--batch``
examples: the median share of the grid's judge requests the race spent (examples judged over
configurations x examples), its quartiles, and the share of races in which a configuration within
``--indifference`` of the best was still a candidate at the end (the guarantee: at least 0.95)::

    python benchmarks/bench_race.py                           # 1,000 races per spread (~2 min)
    python benchmarks/bench_race.py --races 200 --correlation 0.7

``tests/stats/test_racing.py`` runs 60 races per spread with a fixed seed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragmem.stats.racing import simulate  # noqa: E402


def spread_means(configs: int, spread: float) -> list[float]:
    return list(np.linspace(0.5 + spread / 2, 0.5 - spread / 2, configs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--races", type=int, default=1000)
    parser.add_argument("--configs", type=int, default=18)
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--indifference", type=float, default=0.02)
    parser.add_argument("--correlation", type=float, default=0.5)
    parser.add_argument("--spreads", default="0.1,0.3,0.5")
    args = parser.parse_args()
    print(f"{args.races} races of {args.configs} configurations x {args.examples} examples, batch {args.batch}, "
          f"alpha {args.alpha}, indifference {args.indifference}, correlation {args.correlation}")
    print(f"{'spread':>6}  {'median share':>12}  {'quartiles':>13}  {'kept one within indifference':>28}  {'s/race':>6}")
    for spread in (float(s) for s in args.spreads.split(",")):
        means = spread_means(args.configs, spread)
        best = max(means)
        shares, kept = [], 0
        started = time.perf_counter()
        for seed in range(args.races):
            race = simulate(means, args.examples, seed, args.batch, args.alpha, args.indifference, args.correlation)
            shares.append(sum(race.judged(i) for i in range(args.configs)) / (args.configs * args.examples))
            kept += any(means[i] >= best - args.indifference for i in race.candidates())
        q1, median, q3 = np.percentile(shares, [25, 50, 75])
        print(f"{spread:>6}  {median:>12.3f}  {f'[{q1:.3f}, {q3:.3f}]':>13}  {kept / args.races:>28.3f}  "
              f"{(time.perf_counter() - started) / args.races:>6.3f}", flush=True)


if __name__ == "__main__":
    main()
