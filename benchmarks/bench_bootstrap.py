"""The bootstrap alone, classic against Poisson, on N synthetic examples: time, peak memory of the
resampling, and how far the two intervals are apart.

    python benchmarks/bench_bootstrap.py [--n 100000] [--resamples 1000] [--seed 0]

The table has the statistics of a run's default metrics of each kind: a mean with missing values
(avg_coverage), confusion ratios (accuracy, precision, recall, f1) and latency percentiles (apply
kind). Prints one line per method and the largest distance between their interval ends.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from pathlib import Path
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragmem.stats import intervals as stats  # noqa: E402

NAMES = ["avg_coverage", "accuracy", "precision", "recall", "f1", "avg_latency", "latency_p50", "latency_p95",
         "latency_p99", "latency_max"]


def table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    coverage = rng.random(n)
    coverage[rng.random(n) < 0.05] = np.nan
    return pd.DataFrame({"id": [f"q{i}" for i in range(n)], "error": [None] * n, "coverage": coverage,
                         "label": rng.integers(0, 2, n), "verdict": rng.integers(0, 2, n),
                         "latency_s": rng.exponential(0.5, n)})


def timed(data: pd.DataFrame, resamples: int, seed: int, poisson: bool) -> tuple[dict, float, float]:
    aggs = stats.aggregators(data, NAMES)
    tracemalloc.start()
    start = time.perf_counter()
    keys = stats.example_keys(data["id"]) if poisson else None
    intervals = stats.bootstrap(aggs, len(data), resamples, seed, 0.95, keys)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
    tracemalloc.stop()
    return intervals, seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    data = table(args.n, args.seed)
    results = {}
    for method in ("classic", "poisson"):
        results[method], seconds, peak = timed(data, args.resamples, args.seed, method == "poisson")
        print(f"n={args.n} method={method} resamples={args.resamples} time={seconds:.2f} s "
              f"peak_alloc={peak:.0f} MB", flush=True)
    gaps = {name: max(abs(a - b) for a, b in zip(results["classic"][name], results["poisson"][name])) for name in NAMES}
    worst = max(gaps, key=gaps.get)
    print(f"largest distance between interval ends: {gaps[worst]:.4f} ({worst}); "
          + ", ".join(f"{k} {v:.4f}" for k, v in gaps.items()))


if __name__ == "__main__":
    main()
