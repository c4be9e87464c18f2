"""Peak memory and time of a paired comparison of two large runs: chunk by chunk (what ``compare``,
a gate's baseline and a sweep's ties do) against the two tables read whole (what they did).

    python benchmarks/bench_paired.py [--n 1000000] [--resamples 1000]

Writes two per-example tables of ``--n`` rows as Parquet, as a run logs them (``id``, the query,
the answer, six contexts, coverage, label, verdict, latency; B shares 90% of A's examples and has
coverage 0.01 higher on them), then in a fresh process each:

- ``chunked``: ``ragmem.stats.paired_runs.paired_rows`` on the two files (``ParquetTable``, 10,000 rows at a time);
- ``whole``: both files read whole (``read_parquet``), then aligned and compared whole (``_whole``).

Prints, for each, the time, the peak resident memory of its process, and the rows' largest
difference between the two ways (they are the same comparison).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NAMES = ["pass_rate", "accuracy", "f1", "avg_coverage", "latency_p95"]

_CHILD = """
import json, resource, sys, time
from ragmem.stats import paired_runs as paired
from ragmem.tracking import files
how, a, b, resamples, names = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5].split(",")
began = time.perf_counter()
if how == "chunked":
    rows, n = paired.paired_rows(files.ParquetTable(a, built=False), files.ParquetTable(b, built=False),
                                 names, 0.0, None, resamples, 0)
else:
    rows, n = paired._whole(files.read_parquet(a), files.read_parquet(b), names, 0.0, None, resamples, 0, 0.95, "poisson")
print(json.dumps({"seconds": time.perf_counter() - began, "n_shared": n, "rows": rows,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_tables(folder: Path, n: int, part: int = 50_000) -> tuple[Path, Path]:
    """A and B as Parquet, ``part`` rows at a time."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths = folder / "a.parquet", folder / "b.parquet"
    writers = [None, None]
    for start in range(0, n, part):
        rng = np.random.default_rng(start)
        size = min(part, n - start)
        ids = np.arange(start, start + size)
        coverage = rng.random(size)
        for side, path in enumerate(paths):
            # B: 90% of A's examples (ids divisible by 10 are A's alone, replaced by B's own)
            own = ids if side == 0 else np.where(ids % 10 == 0, ids + 10 * n, ids)
            frame = pd.DataFrame({
                "id": [f"q{i}" for i in own],
                "query": [f"What does document {i} say about topic {i % 97}?" for i in own],
                "generated_answer": [f"Document {i} says topic {i % 97} is covered in section {i % 13}." for i in own],
                "contexts": [json.dumps([f"Passage {i}-{k}: a chunk of retrieved text about topic {i % 97}." for k in range(6)])
                             for i in own],
                "error": [None] * size,
                "coverage": np.clip(coverage + 0.01 * side, 0, 1),
                "label": rng.integers(0, 2, size), "verdict": rng.integers(0, 2, size),
                "latency_s": rng.exponential(1.0, size),
            })
            arrow = pa.Table.from_pandas(frame, preserve_index=False)
            if writers[side] is None:
                writers[side] = pq.ParquetWriter(path, arrow.schema)
            writers[side].write_table(arrow)
    for writer in writers:
        writer.close()
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        a, b = write_tables(Path(tmp), args.n)
        print(f"n={args.n}: two tables written in {time.perf_counter() - began:.1f} s "
              f"({(a.stat().st_size + b.stat().st_size) / 2 ** 20:.0f} MB of Parquet)", flush=True)
        found = {}
        for how in ("chunked", "whole"):
            done = subprocess.run([sys.executable, "-c", _CHILD, how, str(a), str(b), str(args.resamples), ",".join(NAMES)],
                                  capture_output=True, text=True, check=True)
            found[how] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{how}: {found[how]['seconds']:.1f} s, peak {found[how]['peak_mb']:.0f} MB, "
                  f"{found[how]['n_shared']} shared", flush=True)
    gap = max(abs((x[k] or 0) - (y[k] or 0)) for x, y in zip(found["chunked"]["rows"], found["whole"]["rows"])
              for k in ("a", "b", "diff", "ci_low", "ci_high", "p_value"))
    print(f"largest difference between the two ways' rows: {gap:.2g}")
    for row in found["chunked"]["rows"]:
        print(f"  {row['metric']}: diff {row['diff']:+.5f} [{row['ci_low']:+.5f}, {row['ci_high']:+.5f}] p={row['p_value']:.3g}")


if __name__ == "__main__":
    main()
