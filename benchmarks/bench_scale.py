"""Time and peak memory of the full offline suite at growing sizes: does the time per example
stay flat, and does a million examples fit in 2 GB?

    python benchmarks/bench_scale.py [--sizes 10000 100000 1000000] [--tokenizer default|jieba|rjieba]
                                     [--chunk-size N] [--workers default|auto|N] [--data fresh|pooled]

For each size, writes that many synthetic bilingual examples as JSONL, one record at a time
(``--data fresh``, the default: no text repeats, a fresh vocabulary per record, ``fresh.py``;
``pooled``: the contexts drawn from a shared pool, the generator of ``bench_vs_ragas.py``, whose
repeated texts ragmem's per-text caches absorb) and runs ``ragmem.evaluate(path, track=False)`` (1000
bootstrap resamples; ``--chunk-size``: ``data.chunk_size``; the tokenizer and the workers: the
settings' unless given) in a fresh
process, sampling the memory of that process and its scoring workers summed as proportional set
size (shared pages once). Prints one line per size, e.g.
``n=100000 ... compute=120.3 s per_1k=1.20 s pss=1650 MB (main process 1480 MB)``, and at the end
the time per 1k examples of the largest size against the one before it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_vs_ragas import _RAGMEM, compile_ragmem, run, write_jsonl  # noqa: E402
from fresh import write_fresh_jsonl  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000, 1000000])
    parser.add_argument("--tokenizer", choices=["default", "jieba", "rjieba"], default="default",
                        help="keywords.tokenizer and generation.tokenizer (default: the settings')")
    parser.add_argument("--workers", default="default", help="orchestration.workers (default: the settings')")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--chunk-size", type=int, default=None, help="data.chunk_size (default: the setting's)")
    parser.add_argument("--data", choices=["fresh", "pooled"], default="fresh")
    args = parser.parse_args()
    per_1k = {}
    compile_ragmem()  # as a wheel install has it (see bench_vs_ragas)
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "data.jsonl"
            (write_fresh_jsonl if args.data == "fresh" else write_jsonl)(path, n)
            extra = [str(args.chunk_size)] if args.chunk_size else []
            side = run(sys.executable, _RAGMEM, str(path), str(args.resamples), args.tokenizer, args.workers, *extra,
                       every=0.05 if n <= 100_000 else 0.5)
        per_1k[n] = side["compute"] / n * 1000
        print(f"n={n} data={args.data} tokenizer={args.tokenizer} workers={args.workers} chunk_size={args.chunk_size or 'default'} "
              f"compute={side['compute']:.1f} s per_1k={per_1k[n]:.2f} s pss={side['rss_mb']:.0f} MB "
              f"(main process {side['main_rss_mb']:.0f} MB)", flush=True)
    if len(per_1k) > 1:
        small, large = sorted(per_1k)[-2:]
        print(f"time per 1k at {large}: {per_1k[large] / per_1k[small]:.3f}x that at {small}")


if __name__ == "__main__":
    main()
