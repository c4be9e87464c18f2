"""How long the results take after a live agent's last answer.

    python benchmarks/bench_live_agent.py [--n 10000] [--latency 0.02] [--concurrency 16] [--tokenizer rjieba|jieba]

Writes N synthetic bilingual examples (``bench_vs_ragas.synthetic``) and a Python agent that
answers each query with the example's own answer and contexts after ``--latency`` seconds (a
retrieval and an LLM call), then runs ``ragmem.evaluate(config, track=False)`` on it in a fresh
process with ``agent.concurrency`` calls in flight. While the agent answers, the scoring workers
are idle but for the metrics begun on each judged batch (``ragmem.runtime.parallel.EarlyMaps``).

Prints one line, e.g. ``n=10000 latency=20 ms concurrency=16 answered=16.7 s done=22.9 s
after_last_answer=6.2 s``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_vs_ragas import synthetic  # noqa: E402

_AGENT = '''import json, time
_BY_QUERY = {{r["query"]: r for r in json.load(open({data!r}, encoding="utf-8"))}}


def answer(query):
    time.sleep({latency!r})
    record = _BY_QUERY[query]
    return {{"answer": record["generated_answer"], "contexts": record["context"]}}
'''

_RUN = '''import json, logging, sys, time
sys.path.insert(0, sys.argv[2])
start, answered = time.perf_counter(), []


class Mark(logging.Handler):
    def emit(self, record):
        if "judge errors" in record.getMessage():  # the line after the last batch is judged
            answered.append(time.perf_counter() - start)


logging.getLogger("ragmem").addHandler(Mark())
logging.getLogger("ragmem").setLevel(logging.INFO)
import ragmem

ragmem.evaluate(config=sys.argv[1], track=False, preflight=False)
print(json.dumps({"answered": answered[0], "done": time.perf_counter() - start}))
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds per agent call")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--tokenizer", choices=["jieba", "rjieba"], default="rjieba")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        data = folder / "data.json"
        data.write_text(json.dumps(synthetic(args.n), ensure_ascii=False), encoding="utf-8")
        (folder / "bench_agent.py").write_text(_AGENT.format(data=str(data), latency=args.latency), encoding="utf-8")
        config = folder / "live.yaml"
        config.write_text(json.dumps({
            "experiment": "bench-live", "data": {"files": [{"path": str(data)}]},
            "agent": {"type": "python", "target": "bench_agent:answer", "concurrency": args.concurrency},
            "keywords": {"tokenizer": args.tokenizer}, "generation": {"tokenizer": args.tokenizer}}), encoding="utf-8")
        done = subprocess.run([sys.executable, "-c", _RUN, str(config), str(folder)], cwd=folder,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"failed:\n{done.stderr.strip()[-2000:]}")
        times = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"n={args.n} latency={args.latency * 1000:.0f} ms concurrency={args.concurrency} "
          f"answered={times['answered']:.1f} s done={times['done']:.1f} s "
          f"after_last_answer={times['done'] - times['answered']:.1f} s")


if __name__ == "__main__":
    main()
