"""A tracked ``ragmem run`` on fresh examples: its time and the peak memory of its process tree.

    python benchmarks/bench_tracked_memory.py [--n 10000] [--config configs/default.yaml] [--repeats 2]

Generates ``--n`` examples whose texts never repeat (``benchmarks/fresh.py``), then runs ``ragmem run
CONFIG --data FILE`` in a home of its own (its own MLflow store; the machine's shared Prefect server,
started by the first run if it is not up) ``--repeats`` times. Every 50 ms it sums the proportional
set size of the command and its descendants, the Prefect server left out (it is not the run's),
and prints, per run, the time, the peak and each process's share at the peak. What the command line
costs where the offline suite (``bench_vs_ragas.py``) costs nothing: the flow, MLflow's logging, the
per-example table's files and plots.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from fresh import write_fresh_jsonl  # noqa: E402


def _pss(process: psutil.Process) -> float:
    try:
        with open(f"/proc/{process.pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:  # (ended between the listing and the reading)
        pass
    return 0.0


def _members(root: psutil.Process) -> list[psutil.Process]:
    """The command and its descendants, without a Prefect server it started (shared, not the run's)."""
    members = [root]
    try:
        children = root.children(recursive=True)
    except psutil.Error:
        return members
    for child in children:
        try:
            if "server" not in " ".join(child.cmdline()[:4]):
                members.append(child)
        except psutil.Error:  # (a zombie, or gone)
            pass
    return members


def measure(command: list[str], env: dict[str, str], cwd: Path) -> tuple[int, float, float, str]:
    """``(exit code, seconds, peak MB, the shares at the peak)`` of ``command``."""
    started = time.perf_counter()
    with open(cwd / "stderr.txt", "w") as err:
        process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
    root = psutil.Process(process.pid)
    peak, shares = 0.0, ""
    while process.poll() is None:
        members = _members(root)
        sizes = [_pss(m) for m in members]
        if sum(sizes) > peak:
            peak = sum(sizes)
            shares = ", ".join(f"{m.pid}: {s:.0f}" for m, s in zip(members, sizes))
        time.sleep(0.05)
    return process.returncode, time.perf_counter() - started, peak, shares


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "default.yaml")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    ragmem = Path(sys.executable).with_name("ragmem")
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        data = work / f"fresh{args.n}.jsonl"
        write_fresh_jsonl(data, args.n)
        env = {**os.environ, "RAGMEM_HOME": str(work / "home"), "MLFLOW_TRACKING_URI": f"sqlite:///{work}/mlflow.db"}
        for repeat in range(1, args.repeats + 1):
            code, seconds, peak, shares = measure([str(ragmem), "run", str(args.config.resolve()), "--data", str(data)],
                                                  env, work)
            print(f"repeat {repeat}: exit {code}, {seconds:.1f} s, peak PSS of the tree {peak:.0f} MB "
                  f"(pid: MB at the peak: {shares})", flush=True)
            if code != 0:
                print((work / "stderr.txt").read_text()[-2000:], file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
