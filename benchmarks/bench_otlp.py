"""A large OTLP JSON export read in bounded memory (issue 60, point 5): is the peak of the reading
process flat in the file's size?

    python benchmarks/bench_otlp.py [--mb 500 50] [--keep]

For each size, a file of about that many MB is written: ONE ExportTraceServiceRequest (the whole
file a single JSON value, on one line: the hardest case, nothing can be read per line), each trace
an AGENT root with its query and answer, a RETRIEVER with three OpenInference documents and an LLM
span with token counts, every text of its own (a fresh vocabulary per trace: nothing repeats), and
the spans of a trace far apart in the file (every root first, then every retriever, then every LLM
span: the reader cannot give a trace before it has read the whole file). Then, in a fresh process,
each trace read (``ragmem.data.otlp.read``), mapped to its record and masked as ``ragmem run`` does
(``spans.to_record``, ``secrets.mask_traffic``) and written as a JSON line; the peak is the process's
proportional set size sampled every 50 ms (``bench_vs_ragas.run``). Prints one line per size.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_vs_ragas import run  # noqa: E402

CODE = """
import json, sys, time
from ragmem.config.secrets import mask_traffic
from ragmem.config.trace_settings import TraceMapping
from ragmem.data import otlp, spans
path, out, spill = sys.argv[1], sys.argv[2], sys.argv[3]
start, n, mapping = time.perf_counter(), 0, TraceMapping()
with open(out, "w", encoding="utf-8") as handle:
    for trace in otlp.read(path, spill_dir=spill):
        record = mask_traffic(spans.to_record(trace, mapping))
        handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\\n")
        n += 1
print(json.dumps({"traces": n, "seconds": time.perf_counter() - start}))
"""


def _words(rng: random.Random, n: int) -> str:
    """``n`` words of 8 letters never seen before (random bytes as letters a-p)."""
    text = rng.randbytes(4 * n).hex().translate(_LETTERS)
    return " ".join(text[k:k + 8] for k in range(0, 8 * n, 8))


_LETTERS = str.maketrans("0123456789abcdef", "abcdefghijklmnop")


def _attr(key: str, value) -> dict:
    kind = "intValue" if isinstance(value, int) else "stringValue"
    return {"key": key, "value": {kind: str(value) if kind == "intValue" else value}}


def _spans(i: int, rng: random.Random, t0: int) -> tuple[dict, dict, dict]:
    trace, start = f"{i + 1:032x}", t0 + i * 10**9
    base = {"traceId": trace, "status": {"code": 1}}
    query, answer = _words(rng, 30) + "?", _words(rng, 120)
    root = {**base, "spanId": f"{3 * i + 1:016x}", "name": "agent", "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 900_000_000),
            "attributes": [_attr("openinference.span.kind", "AGENT"), _attr("input.value", query),
                           _attr("output.value", answer), _attr("session.id", f"s{i % 97}")]}
    docs = [a for d in range(3) for a in (_attr(f"retrieval.documents.{d}.document.id", f"doc-{i}-{d}"),
                                          _attr(f"retrieval.documents.{d}.document.content", _words(rng, 80)))]
    retriever = {**base, "spanId": f"{3 * i + 2:016x}", "parentSpanId": root["spanId"], "name": "retrieve",
                 "startTimeUnixNano": str(start + 10_000_000), "endTimeUnixNano": str(start + 90_000_000),
                 "attributes": [_attr("openinference.span.kind", "RETRIEVER"), _attr("input.value", query), *docs]}
    llm = {**base, "spanId": f"{3 * i + 3:016x}", "parentSpanId": root["spanId"], "name": "llm",
           "startTimeUnixNano": str(start + 100_000_000), "endTimeUnixNano": str(start + 800_000_000),
           "attributes": [_attr("openinference.span.kind", "LLM"), _attr("llm.token_count.prompt", 900),
                          _attr("llm.token_count.completion", 120)]}
    return root, retriever, llm


def write(path: Path, mb: int, seed: int = 0) -> int:
    """About ``mb`` MB of one ExportTraceServiceRequest on one line; returns the number of traces."""
    t0 = time.time_ns() - 86_400 * 10**9
    per_trace = len(json.dumps(_spans(0, random.Random(seed), t0)))
    n = max(1, mb * 10**6 // per_trace)
    with open(path, "w", encoding="utf-8") as out:
        out.write('{"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "app"}, "spans": [')
        for part in range(3):  # every root, then every retriever, then every LLM span
            rng = random.Random(seed)
            for i in range(n):
                span = _spans(i, rng, t0)[part]
                out.write(("," if part or i else "") + json.dumps(span))
        out.write("]}]}]}")
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, nargs="+", default=[50, 500])
    parser.add_argument("--keep", action="store_true", help="keep the files written")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-otlp-", dir=Path.home()))
    try:
        for mb in args.mb:
            path = folder / f"export-{mb}.json"
            began = time.perf_counter()
            n = write(path, mb)
            written = time.perf_counter() - began
            result = run(sys.executable, CODE, str(path), str(folder / f"records-{mb}.jsonl"), str(folder))
            assert result["traces"] == n, result
            print(f"{path.stat().st_size / 1e6:,.0f} MB, {n:,} traces ({3 * n:,} spans; written in {written:.0f} s): "
                  f"read in {result['seconds']:.1f} s ({result['seconds'] / n * 1000:.2f} s per 1k traces), "
                  f"peak PSS {result['rss_mb']:.0f} MB", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
