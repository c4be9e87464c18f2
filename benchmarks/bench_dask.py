"""Speed-up of the Dask task runner with 1 and 2 local workers (``orchestration.task_runner: dask``).

    python benchmarks/bench_dask.py [--n 10000] [--workers 1 2] [--tokenizer jieba|rjieba]

Writes N synthetic bilingual examples and a replay config (tracking off) and times ``ragmem run``
with a LocalCluster of each size, in a temporary folder, once the Prefect server is up (the one the
CLI reuses, or started first, untimed); prints one line, e.g.
``n=10000 dask_workers=1: 30.1 s, 2: 17.9 s, speed-up 1.68x``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_overhead import replay_config, timed  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--tokenizer", choices=["jieba", "rjieba"], default="jieba")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = replay_config(folder, args.n, args.tokenizer, tracking={"enabled": False},
                               orchestration={"task_runner": "dask"})
        ragmem = [sys.executable, "-m", "ragmem.cli", "run", str(config)]
        # the Prefect server the CLI reuses or starts: up before the first timed run
        timed([sys.executable, "-c", "from ragmem.orchestration.server import resolve_api_url; resolve_api_url()"], folder)
        times = {w: timed([*ragmem, "--set", f"orchestration.dask_workers={w}"], folder) for w in args.workers}
    first = times[args.workers[0]]
    shown = ", ".join(f"{w}: {t:.1f} s" for w, t in times.items())
    print(f"n={args.n} tokenizer={args.tokenizer} dask_workers={shown}, speed-up "
          f"{first / times[args.workers[-1]]:.2f}x")


if __name__ == "__main__":
    main()
