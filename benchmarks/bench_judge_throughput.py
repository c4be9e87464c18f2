"""Throughput of the LLM judge client against an OpenAI-compatible fake with a fixed latency.

    python benchmarks/bench_judge_throughput.py [--n 2000] [--concurrency 32] [--latency 0.2]

Starts the tests' OpenAI-compatible stub (``tests/openai_stub.py``: a threaded HTTP server on
127.0.0.1 that answers every chat completion with a valid verdict after ``--latency`` seconds) in a
process of its own, as a real server would be, then judges ``--n`` distinct answer-correctness requests through :class:`ragmem.clients.llm_client.JudgeClient`
(the real ``openai`` client, the cache off) at ``judge.max_concurrency`` = ``--concurrency``.
The ideal rate is concurrency / latency (32 / 0.2 s = 160 verdicts per second); the script prints
the rate reached and its share of the ideal, in one line, and exits 1 below ``--min-share``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragmem.clients.llm_client import JudgeClient  # noqa: E402
from tests.openai_stub import Stub  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--min-share", type=float, default=0.9)
    parser.add_argument("--serve", type=float, metavar="LATENCY", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:  # the fake server's process
        with Stub(chat=lambda request: {"verdict": "yes", "reason": "matches the reference"}, latency_s=args.serve) as stub:
            print(stub.base_url, flush=True)
            threading.Event().wait()
    os.environ.setdefault("RAGMEM_PROGRESS", "off")
    requests = [("answer_correctness", {"question": f"Question {i}?", "reference": f"Answer {i}.",
                                        "answer": f"Answer {i}."}) for i in range(args.n)]
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(args.latency)], stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        settings = {"type": "llm", "model": "bench", "base_url": base_url, "cache": False,
                    "max_concurrency": args.concurrency, "timeout_s": 30}
        JudgeClient(settings).run(requests[: args.concurrency])  # imports done, server warm: not timed
        client = JudgeClient(settings)
        start = time.perf_counter()
        results = client.run(requests)
        elapsed = time.perf_counter() - start
    finally:
        server.terminate()
        server.wait()
    failed = sum(r.error is not None for r in results)
    rate = (len(results) - failed) / elapsed
    ideal = args.concurrency / args.latency
    print(f"verdicts={len(results) - failed} failed={failed} concurrency={args.concurrency} latency={args.latency:g}s "
          f"wall={elapsed:.2f}s rate={rate:.1f}/s ideal={ideal:.0f}/s share={rate / ideal:.1%}")
    sys.exit(0 if failed == 0 and rate >= args.min_share * ideal else 1)


if __name__ == "__main__":
    main()
