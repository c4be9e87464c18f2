"""What writing a run's agent traces costs: ``Tracker.log_agent_traces`` (one batch) against MLflow's
tracing API (what ragmem used before: a transaction per span, trace and assessment), interleaved.

    python benchmarks/bench_agent_traces.py [--n 200] [--repeats 2] [--only batch|api]

Each side writes N traces (a root span and two stages, three retrieved contexts with Chinese text,
one call in seven failed) with 4 assessments each (a judge's verdict, three scores) into a fresh
sqlite store of its own, in a fresh process, the store created and the run opened before the timed
part. Prints per side the best of ``--repeats``: CPU seconds and wall seconds of the writing, and
CPU milliseconds per trace, e.g.::

    batch n=200 cpu 2.3 s wall 2.5 s (11.6 ms a trace) | api n=200 cpu 10.5 s wall 12.0 s (52.5 ms a trace) | 0.22x
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import json, sys, time
from pathlib import Path
from types import SimpleNamespace as NS
sys.path.insert(0, {root!r})
from ragmem.tracking.store import Feedback, Tracker
from tests.tracking.test_agent_traces import through_mlflows_tracing_api

folder, n, side = Path({folder!r}), {n}, {side!r}
tracker = Tracker("sqlite:///" + str(folder / "mlflow.db"), artifact_root=str(folder / "artifacts"))
experiment_id = tracker.experiment_id("bench-traces")
run_id = tracker.client.create_run(experiment_id).info.run_id
now = time.time_ns()
contexts = [NS(to_dict=lambda i=i: {{"id": f"c{{i}}", "text": f"上下文 {{i}}: the index is kept on disk"}}, source="rag")
            for i in range(3)]
calls = [(NS(id=f"e{{i}}", query=f"问题 {{i}}: where is the index kept?", session_id=None),
          NS(started_at_ns=now - 10**9 + i, latency_s=0.5 + i / 1000, timings_s={{"retrieve": 0.1, "llm": 0.3}},
             contexts=contexts, answer=f"answer {{i}}", error=None if i % 7 else "HTTP 503", attempts=1))
         for i in range(n)]
feedback = {{f"e{{i}}": [Feedback("verdict", i % 2, "the reason", "LLM_JUDGE", "judge"), Feedback("ndcg_at_10", 0.5),
                        Feedback("f1", 0.25), Feedback("recall_at_10", 1.0)] for i in range(n)}}
cpu, wall = time.process_time(), time.perf_counter()
if side == "batch":
    written = tracker.log_agent_traces(run_id, "bench-traces", [c[0] for c in calls], [c[1] for c in calls], n,
                                       assess=lambda ids: {{i: feedback[i] for i in ids}})
else:
    through_mlflows_tracing_api(tracker, run_id, experiment_id, calls, feedback)
    written = n
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
found = len(tracker.client.search_traces(locations=[experiment_id], run_id=run_id, max_results=n + 1))
print(json.dumps({{"cpu_s": cpu, "wall_s": wall, "written": written, "found": found}}))
"""


def measure(side: str, n: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-traces-") as folder:
        done = subprocess.run([sys.executable, "-c", _CHILD.format(root=str(ROOT), folder=folder, n=n, side=side)],
                              capture_output=True, text=True, cwd=folder)
        if done.returncode != 0:
            raise SystemExit(f"{side}: failed:\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        if result["found"] != n:
            raise SystemExit(f"{side}: {result['found']} traces found in the store, {n} written")
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", choices=("batch", "api"))
    args = parser.parse_args()
    sides = [args.only] if args.only else ["batch", "api"]
    best: dict[str, dict] = {}
    for _ in range(args.repeats):
        for side in sides:
            result = measure(side, args.n)
            print(f"  {side}: cpu {result['cpu_s']:.2f} s, wall {result['wall_s']:.2f} s", file=sys.stderr)
            if side not in best or result["cpu_s"] < best[side]["cpu_s"]:
                best[side] = result
    parts = [f"{side} n={args.n} cpu {r['cpu_s']:.1f} s wall {r['wall_s']:.1f} s ({1000 * r['cpu_s'] / args.n:.1f} ms a trace)"
             for side, r in best.items()]
    if len(best) == 2:
        parts.append(f"{best['batch']['cpu_s'] / best['api']['cpu_s']:.2f}x")
    print(" | ".join(parts))


if __name__ == "__main__":
    main()
