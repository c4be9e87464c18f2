"""Time each step of an offline evaluation on synthetic bilingual data (no MLflow, no Prefect).

    python benchmarks/bench_pipeline.py --n 10000 [--metrics default|issue2] [--resamples 1000]

Writes a replay dataset of N examples (Chinese and English, contexts recurring across examples as in
real evaluation data) to a temporary folder and prints the seconds each step took. Numbers depend on
the machine; run it before and after a change.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragmem.config.loading import RunConfig, resolve_config  # noqa: E402
from ragmem.run import pipeline  # noqa: E402

ZH = ["向量数据库存储文本的嵌入向量", "检索增强生成先检索相关文档", "重排序模型对候选文档重新打分", "短期记忆保存最近几轮对话",
      "长期记忆保存用户跨会话的偏好", "混合检索用倒数排名融合合并结果", "分块太大会引入无关内容"]
EN = ["A vector database stores embeddings of text", "Retrieval-augmented generation retrieves documents first",
      "A reranker rescores the retrieved candidates", "Short-term memory keeps the last turns",
      "Long-term memory keeps user facts across sessions", "Hybrid search fuses sparse and dense results"]
ISSUE2 = ["accuracy", "precision", "recall", "f1", "avg_coverage", "reference_coverage", "avg_latency",
          "latency_p50", "latency_p95", "latency_p99", "latency_max"]


def synthetic(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    pool = [f"{s}。" for s in ZH] + [f"{s}." for s in EN]
    chunks = [f"{rng.choice(pool)} {rng.choice(pool)}" for _ in range(max(50, n // 3))]
    out = []
    for i in range(n):
        reference = rng.choice(pool)
        contexts = [{"id": f"c{j}", "text": chunks[j], "source": rng.choice(["rag", "memory_short", "memory_long"])}
                    for j in rng.sample(range(len(chunks)), 5)]
        out.append({"id": f"e{i}", "query": f"问题 {i}: {reference[:6]}?", "reference_answer": reference,
                    "generated_answer": rng.choice([reference, rng.choice(pool)]), "context": contexts,
                    "label": rng.randint(0, 1), "latency_ms": rng.uniform(50, 900),
                    "relevant_context_ids": [contexts[rng.randrange(5)]["id"]]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--metrics", choices=["default", "issue2"], default="default")
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.json"
        path.write_text(json.dumps(synthetic(args.n), ensure_ascii=False), encoding="utf-8")
        extra = {"stats": {"resamples": args.resamples}}
        if args.metrics == "issue2":
            extra["metrics"] = ISSUE2
        cfg = RunConfig.from_dict(resolve_config(None, data=str(path), extra=extra))
        timings = {}
        t = time.perf_counter()
        components = pipeline.build_components(cfg)
        timings["build (jieba, stopwords)"] = time.perf_counter() - t
        t = time.perf_counter()
        dataset = pipeline.load(cfg)
        timings["load + validate"] = time.perf_counter() - t
        t = time.perf_counter()
        outputs = pipeline.time_agent(components.agent, dataset.examples, cfg)
        timings["replay"] = time.perf_counter() - t
        t = time.perf_counter()
        judgements = pipeline.judge(components.judge, dataset.examples, outputs)
        timings["keyword judge"] = time.perf_counter() - t
        t = time.perf_counter()
        table = pipeline.build_table(dataset.examples, outputs, judgements, components.keywords)
        timings["table"] = time.perf_counter() - t
        t = time.perf_counter()
        table, result = pipeline.score(table, cfg, components)
        timings["metrics + bootstrap"] = time.perf_counter() - t
    print(f"n={args.n} metrics={args.metrics} ({len(result.values)} values) resamples={args.resamples}")
    for step, seconds in timings.items():
        print(f"  {step:<26} {seconds:8.2f} s")
    print(f"  {'total':<26} {sum(timings.values()):8.2f} s  ({args.n / sum(timings.values()):.0f} examples/s)")


if __name__ == "__main__":
    main()
