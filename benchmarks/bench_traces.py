"""Production traces as data at growing sizes: does the time per 1k traces stay flat, and does the
memory of the process tree stay bounded (the traces are read page by page, the records streamed)?

    python benchmarks/bench_traces.py [--sizes 2000 20000] [--template 500] [--write-back] [--chunk-size N] [--history N]

The store: ``--template`` traces written with MLflow's tracing API (tests/traffic.py: an AGENT root,
MEMORY, RETRIEVER and LLM spans, a session, a user, one in a hundred raising) into a sqlite store on
/dev/shm, then copied in SQL to the largest size, each copy with new trace ids (the spans' contents
rewritten to match) and its own texts (``#i`` made ``#k.i`` in every query and answer). Writing a
trace through MLflow's API costs ~120 ms here (each span is a transaction), 40 minutes for 20,000;
the copies are what MLflow would have written, a thousand times faster. Each size is its own
store (the first N traces of the largest, by start time).

Then, for each size, in a fresh process: ``ragmem.evaluate(config={data: {traces: {experiment,
tracking_uri, since: 30d}}}, track=False)`` (every default metric that needs no reference, 1000
bootstrap resamples), sampling the memory of the process and its workers summed as proportional set
size (``bench_vs_ragas.run``); ``--chunk-size``: ``data.chunk_size`` (the examples held at once:
what a run's memory grows with, up to it). ``--write-back`` adds a tracked run of the smallest size with the
assessments written back (its time apart). Prints one line per size and the ratios of the largest
to the smallest: time per 1k and peak memory.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_vs_ragas import run  # noqa: E402

CODE = """
import json, sys, time
import ragmem
uri, track, chunk, history = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), int(sys.argv[4])
start = time.perf_counter()
traces = {"experiment": "app", "tracking_uri": uri, "since": "30d", **({"history": history} if history >= 0 else {})}
data = {"traces": traces, **({"chunk_size": chunk} if chunk else {})}
result = ragmem.evaluate(config={"data": data,
                                 "tracking": {"uri": uri.replace("app", "eval"), "max_traces": 0}}, track=track)
print(json.dumps({"compute": time.perf_counter() - start, "n": result.summary["n_examples"],
                  "failed": result.summary["counts"]["n_agent_errors"],
                  "faithfulness": result.metrics.get("faithfulness")}))
"""


def write_template(path: Path, n: int) -> float:
    """``n`` traces through MLflow's tracing API into ``path``; the seconds it took."""
    code = ("import sys; sys.path.insert(0, %r); from tests import traffic; "
            "traffic.write_mlflow(%r, 'app', traffic.plan(%d, raised=%d, step_ns=10**6))"
            % (str(ROOT), f"sqlite:///{path}", n, max(1, n // 100)))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                   env={"MLFLOW_ENABLE_ASYNC_TRACE_LOGGING": "false", "PATH": "/usr/bin:/bin"})
    return time.perf_counter() - start


def _new_id(old_hex: str, copy: int) -> str:
    return hashlib.md5(f"{old_hex}:{copy}".encode()).hexdigest()


def copy_traces(path: Path, total: int) -> None:
    """The store's traces copied until it holds ``total``: new ids (``tr-`` + hex, the spans'
    base64 OTel ids and request ids rewritten), texts made distinct, start times shifted."""
    db = sqlite3.connect(path)
    template = [r[0] for r in db.execute("select request_id from trace_info order by timestamp_ms")]
    tables = {name: [r[1] for r in db.execute(f"pragma table_info({name})")]
              for name in ("trace_info", "trace_tags", "trace_request_metadata", "spans")}
    # (named columns: a generated column, which select * returns, is neither listed nor inserted)
    rows = {name: db.execute(f"select {', '.join(columns)} from {name}").fetchall() for name, columns in tables.items()}
    copies = -(-total // len(template)) - 1
    for copy in range(1, copies + 1):
        ids = {t: "tr-" + _new_id(t[3:], copy) for t in template}
        b64 = {base64.b64encode(bytes.fromhex(t[3:])).decode(): base64.b64encode(bytes.fromhex(ids[t][3:])).decode()
               for t in template}

        def rewrite(value, old=None):
            if not isinstance(value, str):
                return value
            value = value.replace("#", f"#{copy}.")  # noqa: B023  (called in this turn)
            if old is not None:
                value = value.replace(old, ids[old])  # noqa: B023
            return value

        for name, columns in tables.items():
            key = columns.index("trace_id" if name == "spans" else "request_id")
            out = []
            for row in rows[name]:
                old = row[key]
                if old not in ids:
                    continue
                new = [rewrite(v, old) for v in row]
                new[key] = ids[old]
                if name == "spans":
                    content = columns.index("content")
                    for before, after in b64.items():
                        if before in new[content]:
                            new[content] = new[content].replace(before, after)
                            break
                if name == "trace_info":
                    new[columns.index("timestamp_ms")] = row[columns.index("timestamp_ms")] + copy * len(template)
                out.append(new)
            marks = ",".join("?" * len(columns))
            db.executemany(f"insert into {name} ({', '.join(columns)}) values ({marks})", out)
        db.commit()
        if len(template) * (copy + 1) >= total:
            break
    extra = db.execute("select count(*) from trace_info").fetchone()[0] - total
    if extra > 0:  # the last copies, cut to the total
        last = [r[0] for r in db.execute("select request_id from trace_info order by timestamp_ms desc limit ?", (extra,))]
        for name, column in (("spans", "trace_id"), ("trace_tags", "request_id"), ("trace_request_metadata", "request_id"),
                             ("trace_info", "request_id")):
            db.executemany(f"delete from {name} where {column} = ?", [(t,) for t in last])
        db.commit()
    db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--template", type=int, default=500)
    parser.add_argument("--write-back", action="store_true")
    parser.add_argument("--chunk-size", type=int, default=0, help="data.chunk_size (default: a traces run's, 1,000)")
    parser.add_argument("--history", type=int, default=-1, help="data.traces.history (default: the setting's, 10)")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as tmp:
        base = Path(tmp) / "template.db"
        took = write_template(base, args.template)
        print(f"template: {args.template} traces through MLflow's tracing API in {took:.1f} s", flush=True)
        for n in sorted(args.sizes):
            folder = Path(tmp) / str(n)
            folder.mkdir()
            shutil.copy(base, folder / "app.db")
            start = time.perf_counter()
            copy_traces(folder / "app.db", n)
            print(f"n={n}: store made in {time.perf_counter() - start:.1f} s", flush=True)
            side = run(sys.executable, CODE, f"sqlite:///{folder / 'app.db'}", "0", str(args.chunk_size), str(args.history), every=0.1)
            assert side["n"] == n, side
            results[n] = side
            print(f"n={n} traces: compute={side['compute']:.1f} s per_1k={side['compute'] / n * 1000:.2f} s "
                  f"pss={side['rss_mb']:.0f} MB (main process {side['main_rss_mb']:.0f} MB) failed={side['failed']} "
                  f"faithfulness={side['faithfulness']}", flush=True)
            if args.write_back and n == min(args.sizes):
                tracked = run(sys.executable, CODE, f"sqlite:///{folder / 'app.db'}", "1", str(args.chunk_size), str(args.history), every=0.1)
                print(f"n={n} with the assessments written back: compute={tracked['compute']:.1f} s "
                      f"per_1k={tracked['compute'] / n * 1000:.2f} s", flush=True)
    if len(results) > 1:
        small, large = min(results), max(results)
        per = {n: r["compute"] / n for n, r in results.items()}
        print(f"{large} against {small}: time per 1k {per[large] / per[small]:.3f}x, "
              f"peak memory {results[large]['rss_mb'] / results[small]['rss_mb']:.3f}x")


if __name__ == "__main__":
    main()
