"""Identity of a run in chunks: the same values and intervals whatever ``data.chunk_size`` and
``orchestration.workers``, and the Poisson bootstrap's intervals against the classic one's.

    python benchmarks/bench_streaming.py [--n 10000] [--chunks 1000 10000 1000000] [--workers 1 2]

Writes ``--n`` synthetic examples as JSONL (the generator of ``bench_vs_ragas.py``), runs
``ragmem.evaluate(track=False)`` at each chunk size (1,000,000: the whole set held in memory, as
before streaming) with the first of ``--workers``, then the held run with each other worker count
and once with ``stats.bootstrap: classic``. Prints, against the held run: the largest difference of
any value, of any interval end, and (classic) of any interval end, each with its metric, and the
time of each run.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_vs_ragas import write_jsonl  # noqa: E402

import ragmem  # noqa: E402

USAGE = ("keywords_cache_hit_rate",)  # how the texts came in, not a result


def _run(path: Path, chunk: int, workers: int, bootstrap: str = "poisson"):
    started = time.perf_counter()
    result = ragmem.evaluate(str(path), {"data": {"chunk_size": chunk}, "orchestration": {"workers": workers},
                                         "stats": {"bootstrap": bootstrap}}, track=False)
    return result, time.perf_counter() - started


def _largest(a: dict, b: dict) -> tuple[float, str]:
    """The largest absolute difference between the numbers of two dicts (a value defined in one
    only: infinite), and its key."""
    worst, where = 0.0, "-"
    for key in a.keys() | b.keys():
        x, y = a.get(key), b.get(key)
        if key in USAGE or (x is None and y is None):
            continue
        pairs = list(zip(x, y)) if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)) else [(x, y)]
        for p, q in pairs:
            gap = math.inf if p is None or q is None else abs(p - q)
            if gap > worst:
                worst, where = gap, key
    return worst, where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--chunks", type=int, nargs="+", default=[1000, 10000, 1000000])
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 1])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.jsonl"
        write_jsonl(path, args.n)
        held, took = _run(path, max(args.chunks + [args.n]), args.workers[0])
        print(f"n={args.n} held (chunk_size {max(args.chunks + [args.n])}, workers {args.workers[0]}): {took:.1f} s, "
              f"{len(held.summary['ci'])} intervals")
        runs = [(f"chunk_size {c}, workers {args.workers[0]}", c, args.workers[0]) for c in args.chunks if c < args.n]
        runs += [(f"held, workers {w}", args.n, w) for w in args.workers[1:]]
        for label, chunk, workers in runs:
            other, took = _run(path, chunk, workers)
            value, value_at = _largest(held.metrics, other.metrics)
            ci, ci_at = _largest(held.summary["ci"], other.summary["ci"])
            print(f"  {label}: {took:.1f} s; largest difference: value {value:.2e} ({value_at}), "
                  f"interval end {ci:.2e} ({ci_at})", flush=True)
        classic, took = _run(path, args.n, args.workers[0], "classic")
        ci, ci_at = _largest(held.summary["ci"], classic.summary["ci"])
        print(f"  classic bootstrap (held): {took:.1f} s; largest distance between interval ends, Poisson "
              f"against classic: {ci:.4f} ({ci_at})")


if __name__ == "__main__":
    main()
