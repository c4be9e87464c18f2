"""CI's memory figure: the full offline suite on 10,000 fresh bilingual examples, its peak PSS against a committed bound.

    python benchmarks/memory_gate.py [--n 10000] [--bound MB]

Generates ``--n`` examples whose texts never repeat (``benchmarks/fresh.py``; a few seconds), runs
``ragmem.evaluate(path, track=False)`` in a fresh process (every default metric, 1000 resamples, the
settings a user gets without asking) and samples the proportional set size of that process and its
scoring workers every 50 ms. Prints one line with the time (printed, never gated) and the peak,
and exits 1 when the peak is above the bound: ``--bound``, else ``peak_pss_mb`` of
``benchmarks/memory_bound.json``. That bound is the figure issue 57 reached plus 15%; it is raised
only in a commit that says why (the file's ``why`` says the last reason).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_vs_ragas import _RAGMEM, run  # noqa: E402
from fresh import write_fresh_jsonl  # noqa: E402

BOUND_FILE = HERE / "memory_bound.json"


def committed_bound(path: Path = BOUND_FILE) -> float:
    """``peak_pss_mb`` of the committed bound file."""
    return float(json.loads(path.read_text(encoding="utf-8"))["peak_pss_mb"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--bound", type=float, help=f"MB (default: peak_pss_mb of {BOUND_FILE.name})")
    args = parser.parse_args(argv)
    bound = args.bound if args.bound is not None else committed_bound()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.jsonl"
        write_fresh_jsonl(path, args.n)
        side = run(sys.executable, _RAGMEM, str(path), "1000", "default", "default")
    peak = side["rss_mb"]
    verdict = "within" if peak <= bound else "ABOVE"
    print(f"memory: the offline suite on {args.n} fresh examples: {side['compute']:.1f} s (not gated), peak PSS "
          f"{peak:.0f} MB (main process {side['main_rss_mb']:.0f} MB), {verdict} the bound of {bound:.0f} MB", flush=True)
    if peak > bound:
        print(f"memory: {peak:.0f} MB is above the bound of {bound:.0f} MB ({BOUND_FILE.relative_to(HERE.parent)}): find "
              f"what grew (python benchmarks/bench_families.py), or raise the bound in a commit that says why",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
