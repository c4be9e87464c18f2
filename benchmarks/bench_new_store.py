"""What making a new SQLite store costs: a copy of the empty store against MLflow's migrations.

    python benchmarks/bench_new_store.py [--repeats 3]

Each measure is a fresh process (as a first ``ragmem run`` in a new project is) that imports MLflow
and then makes a new store with ``ragmem.tracking.store.prepare_local_store``. The CPU and wall time
are those of that call alone; the imports ragmem and MLflow need anyway are left out. ``copy``: the
template in ``$RAGMEM_CACHE_DIR`` (made once before the timing); ``migrate``: a cache folder that
cannot be written, so MLflow migrates the store, as every new store was made before
``ragmem.tracking.empty_store``. The two are interleaved, and the best of ``--repeats`` of each is
printed, e.g.::

    copy     cpu 0.06 s wall 0.06 s | migrate  cpu 0.69 s wall 0.84 s (best of 3)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import json, sys, time
import mlflow, mlflow.store.tracking.sqlalchemy_store  # (what opening any store imports: not timed)
from ragmem.tracking.store import prepare_local_store
cpu, wall = time.process_time(), time.perf_counter()
prepare_local_store(sys.argv[1])
print(json.dumps({"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall}))
"""


def measure(folder: Path, cache: Path, n: int) -> dict:
    env = {**os.environ, "RAGMEM_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", _CHILD, f"sqlite:///{folder / f'store{n}' / 'mlflow.db'}"],
                          env=env, capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cache, unwritable = folder / "cache", folder / "a-file"
        unwritable.write_text("not a folder")  # (a cache folder that cannot be made: the store is migrated)
        measure(folder, cache, -1)  # the template made once
        runs: dict[str, list[dict]] = {"copy": [], "migrate": []}
        for repeat in range(args.repeats):
            runs["copy"].append(measure(folder, cache, 2 * repeat))
            runs["migrate"].append(measure(folder, unwritable / "cache", 2 * repeat + 1))
    print(" | ".join(f"{name:<8} cpu {min(r['cpu'] for r in done):.2f} s wall {min(r['wall'] for r in done):.2f} s"
                     for name, done in runs.items()) + f" (best of {args.repeats})")


if __name__ == "__main__":
    main()
