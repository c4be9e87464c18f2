"""A streamed run on a Dask cluster of separate processes against the threaded run: the same
results, and each worker's peak memory (issue 30: identical results, no worker over 1 GB).

    python benchmarks/bench_dask_cluster.py [--n 100000] [--workers 2] [--chunk-size 10000]
                                            [--tokenizer jieba|rjieba]

Writes N synthetic bilingual examples as JSONL and a replay config (tracking off), starts a
``dask scheduler`` and ``--workers`` separate ``dask worker`` processes (one thread each) on
127.0.0.1, and runs ``ragmem run`` with ``orchestration.task_runner: dask`` and
``orchestration.dask_address`` pointing at the scheduler: each chunk's bounds go to a worker, which
reads the chunk from the file itself. Then the same command on the threaded runner. Memory is
sampled every 0.5 s as proportional set size (``/proc/<pid>/smaps_rollup``): each worker process,
and the ``ragmem run`` process tree. Prints the times, the peaks, and whether the two summaries
(metrics, intervals, counts, notes; the keyword cache's hit rate aside, each worker has its own)
are identical, e.g.::

    n=100000 chunk_size=10000 dask_workers=2: dask 301.2 s, threads 268.4 s; identical: yes
    peak PSS: worker 1 612 MB, worker 2 598 MB; ragmem run (dask) 410 MB, (threads) 1318 MB
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_overhead import replay_config  # noqa: E402


def pss(pid: int) -> int:
    """The process's proportional set size in bytes (0 once it has ended)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            return next(int(line.split()[1]) * 1024 for line in rollup if line.startswith("Pss:"))
    except (OSError, StopIteration):
        return 0


class Peaks(threading.Thread):
    """Samples the PSS of named groups of processes (``groups()``: name -> pids) until stopped."""

    def __init__(self, groups, every: float = 0.5):
        super().__init__(daemon=True)
        self.groups, self.every, self.peak = groups, every, {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for name, pids in self.groups().items():
                self.peak[name] = max(self.peak.get(name, 0), sum(pss(p) for p in pids))
            self.done.wait(self.every)


def tree(pid: int) -> list[int]:
    import psutil

    try:
        process = psutil.Process(pid)
        return [pid, *(c.pid for c in process.children(recursive=True))]
    except psutil.Error:
        return []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed_run(command: list[str], folder: Path, name: str, peaks: dict) -> float:
    """``command`` in ``folder``, its process tree's PSS peak recorded under ``name``."""
    start = time.perf_counter()
    with open(folder / f"{name}.err", "w") as err:
        proc = subprocess.Popen(command, cwd=folder, stdout=subprocess.DEVNULL, stderr=err)
        sampler = Peaks(lambda: {name: tree(proc.pid)})
        sampler.start()
        proc.wait()
        sampler.done.set()
        sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{(folder / f'{name}.err').read_text()[-3000:]}")
    peaks.update(sampler.peak)
    return time.perf_counter() - start


def comparable(path: Path) -> dict:
    summary = json.loads(path.read_text())
    summary["metrics"].pop("keywords_cache_hit_rate", None)  # usage: each worker's own cache
    return {k: summary[k] for k in ("metrics", "ci", "counts", "notes", "n_examples", "n_errors")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--chunk-size", type=int, default=10000)
    parser.add_argument("--tokenizer", choices=["jieba", "rjieba"], default="jieba")
    args = parser.parse_args()
    dask = str(Path(sys.executable).with_name("dask"))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = {**os.environ, "RAGMEM_HOME": str(folder / "home")}
        config = replay_config(folder, args.n, args.tokenizer, tracking={"enabled": False},
                               data={"files": [{"path": "data.jsonl"}], "chunk_size": args.chunk_size})
        ragmem = [sys.executable, "-m", "ragmem.cli", "run", str(config)]
        port = free_port()
        address = f"tcp://127.0.0.1:{port}"
        logs = [open(folder / f"dask-{i}.log", "w") for i in range(args.workers + 1)]
        cluster = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                     "--dashboard-address", ":0", "--no-show"], stdout=logs[0], stderr=logs[0], env=env)]
        try:
            from distributed import Client

            with Client(address, timeout=120) as client:
                cluster += [subprocess.Popen([dask, "worker", address, "--nworkers", "1", "--nthreads", "1",
                                              "--host", "127.0.0.1", "--no-dashboard", "--name", f"worker-{i + 1}"],
                                             stdout=logs[i + 1], stderr=logs[i + 1], env=env)
                            for i in range(args.workers)]
                client.wait_for_workers(args.workers, timeout=300)
            os.environ.update(env)  # the Prefect server the CLI starts in this home: up before the timed runs
            subprocess.run([sys.executable, "-c", "from ragmem.orchestration.server import resolve_api_url; resolve_api_url()"],
                           cwd=folder, env=env, check=True, capture_output=True)
            workers = Peaks(lambda: {f"worker {i}": [p for p in tree(w.pid)[1:]]
                                     for i, w in enumerate(cluster[1:], 1)})
            workers.start()
            peaks: dict = {}
            took = {"dask": timed_run([*ragmem, "--set", "orchestration.task_runner=dask", "--set",
                                       f"orchestration.dask_address={address}", "-o", "dask.json"],
                                      folder, "ragmem run (dask)", peaks)}
            workers.done.set()
            workers.join()
            took["threads"] = timed_run([*ragmem, "-o", "threads.json"], folder, "ragmem run (threads)", peaks)
            a, b = comparable(folder / "dask.json"), comparable(folder / "threads.json")
            same = a == b
            differ = [f"{k}.{name}: {a[k].get(name)} != {b[k].get(name)}" if isinstance(a[k], dict) else k
                      for k in a if a[k] != b[k]
                      for name in (sorted(set(a[k]) | set(b[k])) if isinstance(a[k], dict) else [k])
                      if not isinstance(a[k], dict) or a[k].get(name) != b[k].get(name)]
        finally:
            for proc in reversed(cluster):
                proc.terminate()
            for proc in cluster:
                proc.wait(timeout=60)
            subprocess.run([sys.executable, "-m", "ragmem.cli", "server", "stop"], cwd=folder, env=env, capture_output=True)
    print(f"n={args.n} chunk_size={args.chunk_size} tokenizer={args.tokenizer} dask_workers={args.workers}: "
          f"dask {took['dask']:.1f} s, threads {took['threads']:.1f} s; identical: {'yes' if same else 'NO'}")
    shown = [f"{name} {size / 2**20:.0f} MB" for name, size in {**workers.peak, **peaks}.items()]
    print("peak PSS: " + ", ".join(shown))
    if not same:
        print("differ: " + "; ".join(differ[:10]))


if __name__ == "__main__":
    main()
