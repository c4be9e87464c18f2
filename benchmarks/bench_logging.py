"""What a run's MLflow logging costs: the logging step of ``ragmem.evaluate`` (params, metrics and
their intervals, the dataset input, the agent traces with their assessments, config.json,
summary.json, report.html, the plots and the per-example table's files) at several sizes.

    python benchmarks/bench_logging.py [--sizes 24 1000 10000] [--repeats 2] [--traces]

Each size runs in a fresh process of its own, in a temporary folder with its own MLflow store
(``sqlite:///.../mlflow.db``), on fresh replayed bilingual examples (``fresh.py``: texts that do not
repeat). The store is created and the run opened before the timed step, as in any run (the run is
registered before the first agent call), so the figure is the logging step alone, not MLflow's
import. Prints, per size, the best of ``--repeats`` of the step's wall time and where it went (each
part timed by wrapping the tracker's calls; the rest: the plots, made here at small sizes, which import
matplotlib). With ``--traces`` the examples are production traces instead (``tests/traffic.py`` writes
them with MLflow's tracing API into a store of their own, read as ``data.traces``), so the step also
writes the verdict and scores back onto every trace as assessments (``write_back``). E.g.::

    n=24     log 0.42 s (of runs: 0.42, 0.44; whole run 3.3 s; 0 traces)  (params+metrics 0.05, table 0.01, ...)

The issue's bound (58, point 8): under 2 s at 24 examples on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent

_CHILD = r"""
import json, sys, time, functools
sys.path.insert(0, {here!r})
from pathlib import Path
from fresh import write_fresh_jsonl
import ragmem
from ragmem.run.plain_steps import PLAIN
from ragmem.tracking import record, store

folder, n, traced = Path({folder!r}), {n}, {traced!r}
data = folder / "data.jsonl"
if traced:
    sys.path.insert(0, str(Path({here!r}).parent))
    from tests import traffic
    app = "sqlite:///" + str(folder / "app.db")
    traffic.write_mlflow(app, "app", traffic.plan(n, raised=0, step_ns=10**6))
    given = dict(config={{"data": {{"traces": {{"experiment": "app", "tracking_uri": app, "since": "7d"}}}}}})
else:
    write_fresh_jsonl(data, n, seed=7)
    given = dict(data=str(data))
parts = {{}}

def timed(owner, name, part):
    original = getattr(owner, name)
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            parts[part] = parts.get(part, 0.0) + time.perf_counter() - start
    setattr(owner, name, wrapper)

T = store.Tracker
for name, part in (("log_agent_traces", "traces"), ("log_params", "params+metrics"), ("log_metrics", "params+metrics"),
                   ("set_tags", "params+metrics"), ("log_json", "artifacts"), ("log_text", "artifacts"),
                   ("log_file", "plots"), ("log_table_files", "table"), ("log_dataset", "input")):
    if hasattr(T, name):
        timed(T, name, part)
timed(record, "write_back_assessments", "write_back")
log_s = []
original_log = type(PLAIN).log
def log(self, run, **record_):
    start = time.perf_counter()
    try:
        return original_log(self, run, **record_)
    finally:
        log_s.append(time.perf_counter() - start)
type(PLAIN).log = log
start = time.perf_counter()
result = ragmem.evaluate(**given, experiment="bench-logging", tracking={{"uri": "sqlite:///" + str(folder / "mlflow.db"),
                          "artifact_root": str(folder / "artifacts")}}, journal=False)
total = time.perf_counter() - start
assert result.run_id and len(log_s) == 1, (result.run_id, log_s)
print(json.dumps({{"n": n, "log_s": log_s[0], "total_s": total, "parts": parts,
                   "n_traces": result.metrics.get("n_traces")}}))
"""


def measure(n: int, traced: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-logging-") as folder:
        code = _CHILD.format(here=str(HERE), folder=folder, n=n, traced=traced)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=folder,
                              env={**os.environ, "RAGMEM_HOME": str(Path(folder) / "home")})
        if done.returncode != 0:
            raise SystemExit(f"n={n}: the run failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[24, 1000, 10000])
    parser.add_argument("--repeats", type=int, default=2, help="runs per size, the best kept (default 2)")
    parser.add_argument("--traces", action="store_true", help="production traces, their assessments written back")
    args = parser.parse_args(argv)
    for n in args.sizes:
        start = time.perf_counter()
        runs = [measure(n, args.traces) for _ in range(args.repeats)]
        best = min(runs, key=lambda r: r["log_s"])
        parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(best["parts"].items(), key=lambda kv: -kv[1]))
        each = ", ".join(f"{r['log_s']:.2f}" for r in runs)
        print(f"n={n:<6} log {best['log_s']:.2f} s (of runs: {each}; "
              f"whole run {best['total_s']:.1f} s; {int(best['n_traces'] or 0)} traces)  ({parts})", flush=True)
        print(f"         [{time.perf_counter() - start:.0f} s for this size]", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
