"""Time the LoCoMo memory benchmark end to end, the way a user runs it.

    python benchmarks/bench_memory.py [--conversations 2] [--config configs/locomo.yaml]

Runs ``ragmem bench-memory CONFIG --limit-conversations N`` in a temporary folder (its own MLflow
store; the Prefect server the CLI reuses or starts) and prints the wall-clock seconds and, per method,
the questions answered and the search/answer latencies it logged. Issue 6 asks that 2 conversations
finish "in a few minutes on 2 cores": this script is where that is measured, not a timed test.
Needs the LoCoMo data under ../shared/data/locomo (or pass --data).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=2)
    parser.add_argument("--config", default=str(ROOT / "configs" / "locomo.yaml"))
    parser.add_argument("--data", help="LoCoMo zip, folder or JSON file (default: the config's data.path)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "ragmem.cli", "bench-memory", args.config,
                   "--limit-conversations", str(args.conversations), "--output", "bench.json"]
        if args.data:
            command += ["--data", args.data]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=tmp, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            sys.exit(f"bench-memory exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
        result = json.loads((Path(tmp) / "bench.json").read_text(encoding="utf-8"))
    print(f"conversations={result['n_conversations']} questions={result['n_questions']} "
          f"wall={seconds:.1f} s (CLI start, Prefect, ingest, answer, score, MLflow)")
    for method in result["methods"]:
        metrics = method["metrics"]
        latencies = "  ".join(f"{name}={metrics[name] * 1000:.3f} ms" for name in
                              ("add_latency_p50", "search_latency_p50", "search_latency_p95", "answer_latency_p95")
                              if metrics.get(name) is not None)
        row = f"token_f1={metrics['token_f1']:.4f}  {latencies}"
        print(f"  {method['method']:<13} {row}")


if __name__ == "__main__":
    main()
