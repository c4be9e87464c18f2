"""Do ragmem's 95% intervals contain the truth 95% of the time? The oracle of every interval family.

For each interval family ragmem prints, ``--datasets`` simulated datasets with a known truth at each
size n, each given the interval ragmem's own code computes (the same functions a run, ``ragmem
compare`` and a gate call: :mod:`ragmem.stats.intervals`, :mod:`ragmem.stats.clusters`,
:func:`ragmem.metrics.estimators.ppi_from_sums`), and the share of intervals that contain the truth::

    python benchmarks/bench_coverage.py                      # 1,000 datasets, n = 30, 100, 1000 (~15 min)
    python benchmarks/bench_coverage.py --datasets 200 --n 100   # a quick look

The families (truth in brackets):

- ``mean 0/1``: a pass rate, examples Bernoulli(0.7) [0.7];
- ``ratio``: a precision, Σ TP / Σ predicted positive, each example predicted positive with
  probability 0.6 and then right with probability 0.8 [0.8];
- ``p95 latency``: latencies lognormal(0, 0.5) [exp(0.5 · z_0.95)], the order-statistic interval
  a run gives a percentile (:func:`ragmem.stats.intervals.quantile_interval`); and the percentile
  bootstrap of the same (what runs gave it before 2026-12-03, and what clustered runs still do);
- ``paired diff``: B - A of two 0/1 metrics of the same examples (A = u < 0.6, B = u < 0.65 for one
  uniform u per example) [0.05], the paired bootstrap of ``ragmem compare``;
- ``PPI``: the prediction-powered pass rate, a third of the examples (at least 10) labelled
  (labels Bernoulli(0.7), the judge right 85% of the time) [0.7];
- ``clustered, G clusters``: a 0/1 metric whose examples come in G equal clusters with an
  intra-cluster correlation of 0.2 (each cluster's rate Beta(2.8, 1.2), mean 0.7) [0.7], resampled by
  cluster with expanded percentile levels (``stats.cluster_by``);
- ``clustered as examples``: the same data resampled as if independent (what a run without
  ``stats.cluster_by`` does): to show what clusters cost when ignored.

A coverage estimated from D datasets has a standard error of about sqrt(0.95 · 0.05 / D): 0.007 at
1,000. ``tests/stats/test_coverage.py`` runs a smaller version with a fixed seed.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragmem.metrics.base import apply_aggregator, mean_aggregator, ratio_aggregator  # noqa: E402
from ragmem.metrics.estimators import pass_rate_ppi, ppi_statistics  # noqa: E402
from ragmem.metrics import latency  # noqa: E402
from ragmem.stats import intervals  # noqa: E402
from ragmem.stats.clusters import resampling_keys  # noqa: E402

CONFIDENCE = 0.95
P95_TRUTH = math.exp(0.5 * 1.6448536269514722)
ICC = 0.2


@dataclass(frozen=True)
class Family:
    name: str
    truth: float
    interval: Callable[[np.random.Generator, int, int, int], tuple[float, float] | None]
    clusters: int | None = None  # clustered families: None at sizes with fewer than 2 examples a cluster


def _ids(n: int, dataset: int) -> list[str]:
    return [f"d{dataset}-e{i}" for i in range(n)]


def _mean01(rng, n, resamples, dataset):
    values = (rng.random(n) < 0.7).astype(float)
    import pandas as pd
    agg = mean_aggregator(pd.Series(values))
    keys = resampling_keys(_ids(n, dataset))
    return intervals.bootstrap({"m": agg}, n, resamples, dataset, CONFIDENCE, keys)["m"]


def _ratio(rng, n, resamples, dataset):
    predicted = rng.random(n) < 0.6
    right = predicted & (rng.random(n) < 0.8)
    agg = ratio_aggregator(right.astype(float), predicted.astype(float), math.nan)
    keys = resampling_keys(_ids(n, dataset))
    return intervals.bootstrap({"m": agg}, n, resamples, dataset, CONFIDENCE, keys)["m"]


def _p95(rng, n, resamples, dataset):
    import pandas as pd
    aggs = latency.aggregators(pd.DataFrame({"latency_s": rng.lognormal(0.0, 0.5, n)}), ["latency_p95"], math.nan)
    keys = resampling_keys(_ids(n, dataset))
    return intervals.bootstrap(aggs, n, resamples, dataset, CONFIDENCE, keys)["latency_p95"]


def _p95_bootstrap(rng, n, resamples, dataset):
    agg = apply_aggregator(rng.lognormal(0.0, 0.5, n), *latency.STATISTICS["p95"])  # (no order statistics)
    keys = resampling_keys(_ids(n, dataset))
    return intervals.bootstrap({"m": agg}, n, resamples, dataset, CONFIDENCE, keys)["m"]


def _paired(rng, n, resamples, dataset):
    import pandas as pd
    u = rng.random(n)
    a, b = mean_aggregator(pd.Series((u < 0.6).astype(float))), mean_aggregator(pd.Series((u < 0.65).astype(float)))
    keys = resampling_keys(_ids(n, dataset))
    return intervals.paired("m", a, b, resamples, dataset, CONFIDENCE, keys, permutations=0).ci


def _ppi(rng, n, resamples, dataset):
    n_labelled = max(10, n // 3)
    labels = (rng.random(n) < 0.7).astype(float)
    judged = np.where(rng.random(n) < 0.85, labels, 1 - labels)
    labelled = np.arange(n) < n_labelled
    rows = ppi_statistics(labels, judged, labelled, ~labelled)
    estimate = pass_rate_ppi(rows.sum(axis=0), CONFIDENCE)
    return None if estimate is None else (estimate.low, estimate.high)


def _clustered_data(rng, n, groups):
    cluster = np.arange(n) % groups
    rate = rng.beta(0.7 * (1 / ICC - 1), 0.3 * (1 / ICC - 1), groups)
    return (rng.random(n) < rate[cluster]).astype(float), cluster


def clustered(groups: int, as_examples: bool = False):
    def interval(rng, n, resamples, dataset):
        import pandas as pd
        values, cluster = _clustered_data(rng, n, groups)
        agg = mean_aggregator(pd.Series(values))
        if as_examples:
            keys, count = resampling_keys(_ids(n, dataset)), None
        else:
            keys, count = resampling_keys(_ids(n, dataset), [f"d{dataset}-c{c}" for c in cluster]), groups
        return intervals.bootstrap({"m": agg}, n, resamples, dataset, CONFIDENCE, keys, count)["m"]
    return interval


FAMILIES = [
    Family("mean 0/1", 0.7, _mean01),
    Family("ratio (precision)", 0.8, _ratio),
    Family("p95 latency", P95_TRUTH, _p95),
    Family("p95 latency, percentile bootstrap", P95_TRUTH, _p95_bootstrap),
    Family("paired diff", 0.05, _paired),
    Family("PPI (1/3 labelled)", 0.7, _ppi),
    *(Family(f"clustered, {g} clusters", 0.7, clustered(g), g) for g in (10, 30, 100)),
    Family("clustered (30) as examples", 0.7, clustered(30, as_examples=True), 30),
]


def coverage(family: Family, n: int, datasets: int, resamples: int, seed: int) -> tuple[float, int, float] | None:
    """(share of intervals holding the truth, how many intervals there were, mean width); ``None``
    for a clustered family at a size with fewer than two examples a cluster."""
    if family.clusters is not None and n < 2 * family.clusters:
        return None
    rng = np.random.default_rng([seed, n, zlib.crc32(family.name.encode())])
    held = counted = 0
    widths = []
    for dataset in range(datasets):
        ci = family.interval(rng, n, resamples, seed * 1_000_003 + dataset)
        if ci is None:
            continue
        counted += 1
        held += ci[0] <= family.truth <= ci[1]
        widths.append(ci[1] - ci[0])
    return (held / counted, counted, float(np.mean(widths))) if counted else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--n", type=int, nargs="+", default=[30, 100, 1000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=None, help="families whose name contains this")
    args = parser.parse_args(argv)
    families = [f for f in FAMILIES if args.only is None or args.only in f.name]
    print(f"coverage of nominal {CONFIDENCE:.0%} intervals: {args.datasets} datasets per cell, "
          f"{args.resamples} resamples, seed {args.seed} (standard error ~{math.sqrt(0.95 * 0.05 / args.datasets):.3f})")
    print("| family | " + " | ".join(f"n = {n}" for n in args.n) + " |")
    print("|---|" + "---|" * len(args.n))
    start = time.perf_counter()
    outside = []
    for family in families:
        cells = []
        for n in args.n:
            found = coverage(family, n, args.datasets, args.resamples, args.seed)
            if found is None:
                cells.append("")
                continue
            share, counted, width = found
            cells.append(f"{share:.3f}" + ("" if counted == args.datasets else f" ({counted})"))
            if not 0.93 <= share <= 0.97:
                outside.append(f"{family.name} at n = {n}: {share:.3f}")
        print(f"| {family.name} | " + " | ".join(cells) + " |", flush=True)
    print(f"({time.perf_counter() - start:.0f} s)")
    if outside:
        print("outside [0.93, 0.97]: " + "; ".join(outside))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
