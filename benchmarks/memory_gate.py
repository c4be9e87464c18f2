"""CI's memory figures: the full offline suite, and a tracked run, on 10,000 fresh bilingual examples, each peak PSS against a committed bound.

    python benchmarks/memory_gate.py [--n 10000] [--bound MB] [--tracked]

Generates ``--n`` examples whose texts never repeat (``benchmarks/fresh.py``; a few seconds), runs
``ragmem.evaluate(path, track=False)`` in a fresh process (every default metric, 1000 resamples, the
settings a user gets without asking) and samples the proportional set size of that process and its
scoring workers every 50 ms. Prints one line with the time (printed, never gated) and the peak,
and exits 1 when the peak is above the bound: ``--bound``, else ``peak_pss_mb`` of
``benchmarks/memory_bound.json``. That bound is the figure issue 57 reached plus 15%; it is raised
only in a commit that says why (the file's ``why`` says the last reason).

``--tracked``: the same for ``ragmem run configs/default.yaml --data`` the examples (the command line's
path: the flow, MLflow's logging, the per-example table's files), in a home, a store and a Prefect
server of its own (stopped at the end), its process tree sampled as ``bench_tracked_memory.py`` does;
the bound is ``tracked_peak_pss_mb`` (a 10k run peaked at 1,046 MB before its table's files were
written on a thread, 664-670 MB after).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_tracked_memory import measure  # noqa: E402
from bench_vs_ragas import _RAGMEM, run  # noqa: E402
from fresh import write_fresh_jsonl  # noqa: E402

BOUND_FILE = HERE / "memory_bound.json"


def committed_bound(path: Path = BOUND_FILE, key: str = "peak_pss_mb") -> float:
    """``key`` of the committed bound file (``peak_pss_mb``, or ``tracked_peak_pss_mb``)."""
    return float(json.loads(path.read_text(encoding="utf-8"))[key])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def tracked(path: Path, folder: Path) -> tuple[float, float, str]:
    """``(seconds, peak MB, the shares at the peak)`` of ``ragmem run configs/default.yaml --data path`` in a
    home, store and Prefect server under ``folder``; the server stopped afterwards."""
    ragmem = Path(sys.executable).with_name("ragmem")
    env = {**os.environ, "RAGMEM_HOME": str(folder / "home"), "RAGMEM_SERVER_HOME": str(folder / "server"),
           "RAGMEM_PREFECT_PORT": str(_free_port()), "MLFLOW_TRACKING_URI": f"sqlite:///{folder}/mlflow.db"}
    env.pop("PREFECT_API_URL", None)
    try:
        code, seconds, peak, shares = measure([str(ragmem), "run", str(HERE.parent / "configs" / "default.yaml"),
                                               "--data", str(path)], env, folder)
    finally:
        subprocess.run([str(ragmem), "server", "stop"], env=env, cwd=folder, capture_output=True, timeout=120)
    if code != 0:
        raise SystemExit(f"memory: the tracked run failed (exit {code}): {(folder / 'stderr.txt').read_text()[-2000:]}")
    return seconds, peak, shares


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--bound", type=float, help=f"MB (default: peak_pss_mb, with --tracked tracked_peak_pss_mb, of {BOUND_FILE.name})")
    parser.add_argument("--tracked", action="store_true", help="a tracked ragmem run instead of the offline suite")
    args = parser.parse_args(argv)
    key = "tracked_peak_pss_mb" if args.tracked else "peak_pss_mb"
    bound = args.bound if args.bound is not None else committed_bound(key=key)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.jsonl"
        write_fresh_jsonl(path, args.n)
        if args.tracked:
            seconds, peak, shares = tracked(path, Path(tmp))
            what, parts = "a tracked ragmem run", f"pid: MB at the peak: {shares}"
        else:
            side = run(sys.executable, _RAGMEM, str(path), "1000", "default", "default")
            seconds, peak = side["compute"], side["rss_mb"]
            what, parts = "the offline suite", f"main process {side['main_rss_mb']:.0f} MB"
    verdict = "within" if peak <= bound else "ABOVE"
    print(f"memory: {what} on {args.n} fresh examples: {seconds:.1f} s (not gated), peak PSS {peak:.0f} MB ({parts}), "
          f"{verdict} the bound of {bound:.0f} MB", flush=True)
    if peak > bound:
        print(f"memory: {peak:.0f} MB is above the bound of {bound:.0f} MB ({key} of "
              f"{BOUND_FILE.relative_to(HERE.parent)}): find what grew (python benchmarks/bench_families.py, "
              f"benchmarks/bench_tracked_memory.py), or raise the bound in a commit that says why", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
