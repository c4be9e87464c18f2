"""Time and peak memory of the full offline suite at growing sizes: is it linear, and does 100k fit
in 2 GB?

    python benchmarks/bench_scale.py [--sizes 10000 30000 100000] [--tokenizer rjieba|jieba]

For each size, writes that many synthetic bilingual examples (the generator of
``bench_vs_ragas.py``) and runs ``ragmem.evaluate(path, track=False)`` (1000 bootstrap resamples)
in a fresh process, sampling the summed RSS of that process and its scoring workers. Prints one
line per size, e.g. ``n=100000 compute=120.3 s per_1k=1.20 s rss=1650 MB``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_vs_ragas import _RAGMEM, run, synthetic  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 30000, 100000])
    parser.add_argument("--tokenizer", choices=["jieba", "rjieba"], default="rjieba")
    parser.add_argument("--workers", default="auto")
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "data.json"
            path.write_text(json.dumps(synthetic(n), ensure_ascii=False), encoding="utf-8")
            side = run(sys.executable, _RAGMEM, str(path), str(args.resamples), args.tokenizer, args.workers)
        print(f"n={n} tokenizer={args.tokenizer} workers={args.workers} compute={side['compute']:.1f} s "
              f"per_1k={side['compute'] / n * 1000:.2f} s rss={side['rss_mb']:.0f} MB "
              f"(main process {side['main_rss_mb']:.0f} MB)", flush=True)


if __name__ == "__main__":
    main()
