"""What Prefect and MLflow add: ``ragmem run`` (Prefect flow, MLflow run) against
``ragmem.evaluate(track=False)`` on the same data.

    python benchmarks/bench_overhead.py [--n 10000] [--tokenizer rjieba|jieba] [--task-runner threads|dask] [--repeats 1]

Writes N synthetic bilingual examples and a replay config, then times, in a temporary folder of its
own (its own MLflow store; the Prefect server the CLI reuses or starts; both exist when timed: a
warm-up run creates them first, as a user's first run does once):

- ``ragmem.evaluate(config, track=False)`` in a fresh process (wall time of the process);
- ``ragmem run CONFIG`` (wall time of the command: Prefect, MLflow params, metrics, the per-example
  table, traces and report).

With ``--repeats N`` the two are timed N times, interleaved (evaluate, run, evaluate, run, ...),
each pair printed, then the median of each. Prints one line, e.g. ``n=10000 evaluate=15.2 s run=16.4 s overhead=+7.9% (imports: prefect 1.7 s,
mlflow store 2.4 s)``: the imports are the part of the overhead no change to ragmem removes, each
timed in a fresh process that has imported ragmem already (Prefect's package; MLflow's package and its
sqlite store module, as the first ``MlflowClient`` call on the default store imports them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_vs_ragas import write_jsonl  # noqa: E402

_EVALUATE = "import ragmem, sys; ragmem.evaluate(config=sys.argv[1], track=False)"
_IMPORT = "import ragmem.api, time; t = time.perf_counter(); import {}; print(time.perf_counter() - t)"


def import_time(modules: str) -> float:
    """Seconds to import ``modules`` in a fresh process that has imported ragmem."""
    done = subprocess.run([sys.executable, "-c", _IMPORT.format(modules)], capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{done.stderr.strip()[-2000:]}")
    return time.perf_counter() - start


def replay_config(folder: Path, n: int, tokenizer: str, **sections) -> Path:
    """N synthetic examples and a replay config naming them (plus ``sections``), in ``folder``."""
    write_jsonl(folder / "data.jsonl", n)
    config = folder / "bench.yaml"
    config.write_text(json.dumps({
        "experiment": "bench", "data": {"files": [{"path": "data.jsonl"}]}, "agent": {"type": "replay"},
        "keywords": {"tokenizer": tokenizer}, "generation": {"tokenizer": tokenizer}, **sections}), encoding="utf-8")
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--tokenizer", choices=["jieba", "rjieba"], default="rjieba")
    parser.add_argument("--task-runner", choices=["threads", "dask"], default="threads")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved pairs of evaluate and run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = replay_config(folder, args.n, args.tokenizer, orchestration={"task_runner": args.task_runner})
        ragmem = [sys.executable, "-m", "ragmem.cli"]
        try:
            timed([*ragmem, "run", str(config)], folder)  # warm-up: the Prefect server, the MLflow store's creation
            pairs = []
            for i in range(args.repeats):  # interleaved: a slow stretch of the machine touches both sides
                pairs.append((timed([sys.executable, "-c", _EVALUATE, str(config)], folder),
                              timed([*ragmem, "run", str(config)], folder)))
                if args.repeats > 1:
                    print(f"pair {i + 1}: evaluate={pairs[-1][0]:.1f} s run={pairs[-1][1]:.1f} s "
                          f"({pairs[-1][1] / pairs[-1][0]:.3f}x)", flush=True)
        finally:  # the home's Prefect server goes with its folder
            subprocess.run([*ragmem, "server", "stop"], cwd=folder, capture_output=True)
        evaluate, run = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
    prefect, store = import_time("prefect"), import_time("mlflow, mlflow.store.tracking.sqlalchemy_store")
    print(f"n={args.n} tokenizer={args.tokenizer} task_runner={args.task_runner} evaluate={evaluate:.1f} s "
          f"run={run:.1f} s overhead={(run / evaluate - 1) * 100:+.1f}% (imports: prefect {prefect:.1f} s, "
          f"mlflow store {store:.1f} s)")


if __name__ == "__main__":
    main()
