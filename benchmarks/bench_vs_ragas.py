"""ragmem's full offline suite against RAGAS's five non-LLM metrics, side by side on the same data.

    python benchmarks/bench_vs_ragas.py [--n 10000] [--resamples 1000] [--only ragmem|ragas]
                                        [--tokenizer default|jieba|rjieba] [--workers default|auto|N]
                                        [--data fresh|pooled] [--repeats 2]

Writes N synthetic bilingual examples (``--data fresh``, the default: no text repeats, a fresh
vocabulary per record, ``benchmarks/fresh.py``; ``pooled``: as below), then times each side
``--repeats`` times, interleaved, and compares the best of each (time and peak apart).

``pooled``: half Chinese; 6 contexts each drawn from a shared pool of distinct texts; answers of 20-40 words or
characters; seeded. Each run is a fresh process of its own (so imports count and peak RSS is that
process's alone):

- ragmem: ``ragmem.evaluate(path, track=False)``: every default metric with ``--resamples``
  bootstrap resamples (no MLflow, no Prefect), in the configuration a user gets without asking
  (issue 30), or with ``keywords.tokenizer`` and ``generation.tokenizer`` set to ``--tokenizer``
  (``jieba``: the pure-Python reference) and ``orchestration.workers`` to ``--workers``;
- RAGAS 0.4.3: ``ragas.evaluate`` with BleuScore, RougeScore, NonLLMStringSimilarity, ExactMatch and
  NonLLMContextPrecisionWithReference, in a virtual environment of its own
  (``benchmarks/.venv-ragas``, made on first use: ragas==0.4.3 with the langchain 0.3 line pinned,
  which a fresh install of ragas 0.4.3 needs to import, plus sacrebleu, rouge-score and rapidfuzz).

Prints one line per side and one line of ratios, e.g.
``ragmem n=10000 compute=30.4 s rss=807 MB | ragas compute=32.0 s rss=904 MB | time 0.95x rss 0.89x``.
``compute`` is the wall time in that process from the library's evaluation entry points imported
(``ragmem.api``; ``ragas.evaluate`` and the metric classes) to the scores in hand, the reading of
the data file included on both sides; ``total`` adds the interpreter start and those imports;
``rss`` is the peak of the summed resident memory of that process and its
children (ragmem's scoring workers included), sampled every 50 ms.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RAGAS_VENV = HERE / ".venv-ragas"
RAGAS_REQUIREMENTS = ["ragas==0.4.3", "langchain<1", "langchain-core<1", "langchain-community<0.4",
                      "langchain-openai<1", "sacrebleu", "rouge-score", "rapidfuzz"]

ZH_WORDS = ("检索 增强 生成 向量 数据库 嵌入 重排序 模型 短期 记忆 长期 用户 偏好 混合 稀疏 稠密 结果 分块 上下文 答案 问题 "
            "知识库 延迟 召回率 精确度 索引 查询 文档 段落 分数 排名 融合 窗口 会话 智能体 工具 系统 方法 评估 指标 "
            "数据 训练 推理 服务 请求 响应 缓存 存储 计算 网络 内容 信息 相关 准确 快速 稳定 支持 提供 使用 需要 "
            "可以 通过 进行 包括 我们 他们 这个 那个 因为 所以 但是 如果 已经 还是 非常 重要 简单 复杂").split()
EN_WORDS = ("retrieval augmented generation vector database embedding reranker model short long term memory user "
            "preference hybrid sparse dense result chunk context answer question knowledge base latency recall "
            "precision index query document passage score rank fusion window session agent tool").split()


def _text(rng: random.Random, chinese: bool, low: int, high: int) -> str:
    """``low``-``high`` words (English) or characters (Chinese, made of common words)."""
    if chinese:
        size, words = rng.randint(low, high), []
        while sum(map(len, words)) < size:
            words.append(rng.choice(ZH_WORDS))
        return "".join(words) + "。"
    return " ".join(rng.choice(EN_WORDS) for _ in range(rng.randint(low, high))).capitalize() + "."


def synthetic(n: int, seed: int = 0) -> list[dict]:
    """N examples, half Chinese, 6 contexts each from a pool of ~3.2 distinct texts per example."""
    return list(synthetic_records(n, seed))


def write_jsonl(path: Path, n: int, seed: int = 0) -> None:
    """:func:`synthetic`'s examples as JSONL, one at a time (a million would take gigabytes as a list)."""
    with open(path, "w", encoding="utf-8") as handle:
        for record in synthetic_records(n, seed):
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def synthetic_records(n: int, seed: int = 0):
    """The examples of :func:`synthetic`, one by one."""
    rng = random.Random(seed)
    pool_size = max(60, int(n * 3.2))
    # about 106 characters a context, as in the data of issue 13 (32,000 texts, 3.4 M characters at 10k)
    pool = [_text(rng, True, 80, 130) if i % 2 == 0 else _text(rng, False, 10, 20) for i in range(pool_size)]
    for i in range(n):
        chinese = i % 2 == 0
        reference = _text(rng, chinese, 20, 40)
        answer = reference if rng.random() < 0.3 else _text(rng, chinese, 20, 40)
        picks = rng.sample(range(pool_size), 6)
        yield {"id": f"e{i}", "query": _text(rng, chinese, 6, 12), "reference_answer": reference,
               "generated_answer": answer, "label": rng.randint(0, 1),
               "context": [{"id": f"c{j}", "text": pool[j]} for j in picks],
               "relevant_context_ids": [f"c{picks[rng.randrange(6)]}"]}


_RAGMEM = """
import json, resource, sys, time
t0 = time.perf_counter()
import ragmem, ragmem.api  # the entry point ragmem.evaluate calls (as the RAGAS side imports ragas.evaluate)
t1 = time.perf_counter()
tok, workers = sys.argv[3], sys.argv[4]
chunk = {"data": {"chunk_size": int(sys.argv[5])}} if len(sys.argv) > 5 else None  # data.chunk_size
tokenizer = {} if tok == "default" else {"keywords": {"tokenizer": tok}, "generation": {"tokenizer": tok}}
orchestration = {} if workers == "default" else {"orchestration": {"workers": workers if workers == "auto" else int(workers)}}
result = ragmem.evaluate(sys.argv[1], chunk, track=False, stats={"resamples": int(sys.argv[2])}, **tokenizer, **orchestration)
t2 = time.perf_counter()
print(json.dumps({"compute": t2 - t1, "total": t2 - t0, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "n": result.summary["n_examples"], "metrics": len(result.metrics)}))
"""

_RAGAS = """
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
from ragas import EvaluationDataset, evaluate
from ragas.metrics import BleuScore, ExactMatch, NonLLMContextPrecisionWithReference, NonLLMStringSimilarity, RougeScore
t1 = time.perf_counter()
records = json.load(open(sys.argv[1], encoding="utf-8"))  # timed, as ragmem's reading of the file is
dataset = EvaluationDataset.from_list([{
    "user_input": r["query"], "response": r["generated_answer"], "reference": r["reference_answer"],
    "retrieved_contexts": [c["text"] for c in r["context"]],
    "reference_contexts": [c["text"] for c in r["context"] if c["id"] in r["relevant_context_ids"]]} for r in records])
result = evaluate(dataset, metrics=[BleuScore(), RougeScore(), NonLLMStringSimilarity(), ExactMatch(),
                                    NonLLMContextPrecisionWithReference()], show_progress=False)
scores = result.to_pandas()
t2 = time.perf_counter()
print(json.dumps({"compute": t2 - t1, "total": t2 - t0, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "n": len(scores)}))
"""


def compile_ragmem() -> None:
    """Byte-compile ragmem's modules once, as installing a wheel does: with ``PYTHONDONTWRITEBYTECODE``
    set (as on this machine) an editable checkout would otherwise compile every module it imports in
    every process, about a second of the timed call (RAGAS's site-packages were compiled by pip)."""
    import compileall

    compileall.compile_dir(str(ROOT / "ragmem"), quiet=1)


def ragas_python() -> Path:
    python = RAGAS_VENV / "bin" / "python"
    if not python.exists():
        print(f"making {RAGAS_VENV} (ragas==0.4.3 and what it needs to import; once)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(RAGAS_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *RAGAS_REQUIREMENTS], check=True)
    return python


def run(python: Path | str, code: str, *args: str, every: float = 0.05) -> dict:
    """Run ``code`` in a fresh process; its JSON line, with ``rss_mb`` replaced by the peak of the
    memory of the process and all its children (ragmem's worker processes count) summed as
    proportional set size (a page two processes share counts half in each: shared pages once),
    sampled every ``every`` seconds from here; ``main_rss_mb`` the process's own peak."""
    import psutil

    def pss(member) -> int:
        try:  # Linux's one-line total (psutil's memory_full_info reads every mapping: a core's worth at 50 ms)
            with open(f"/proc/{member.pid}/smaps_rollup") as rollup:
                return next(int(line.split()[1]) * 1024 for line in rollup if line.startswith("Pss:"))
        except (OSError, StopIteration):  # no PSS on this system: RSS
            return member.memory_info().rss

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([str(python), "-c", code, *args], stdout=out, stderr=err, text=True, cwd=ROOT)
        peak = main_peak = 0
        tree = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                members = [tree, *tree.children(recursive=True)]
                sizes = [pss(m) for m in members if m.is_running()]
                peak, main_peak = max(peak, sum(sizes)), max(main_peak, sizes[0] if sizes else 0)
            except psutil.Error:  # a child ended between listing and reading
                pass
            time.sleep(every)
        out.seek(0), err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"failed: {err.read().strip()[-2000:]}")
        result = json.loads(out.read().strip().splitlines()[-1])
    result["rss_mb"] = peak / 2**20
    result["main_rss_mb"] = main_peak / 2**20
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--only", choices=["ragmem", "ragas"])
    parser.add_argument("--tokenizer", choices=["default", "jieba", "rjieba"], default="default",
                        help="keywords.tokenizer and generation.tokenizer of the ragmem side (default: the settings')")
    parser.add_argument("--workers", default="default", help="orchestration.workers of the ragmem side (default: the settings')")
    parser.add_argument("--data", choices=["fresh", "pooled"], default="fresh",
                        help="fresh: no text repeats (benchmarks/fresh.py); pooled: contexts from a shared pool (synthetic)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each side, interleaved; the best of each is compared")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.json"
        if args.data == "fresh":
            from fresh import fresh_records
            records = list(fresh_records(args.n))
        else:
            records = synthetic(args.n)
        path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
        texts = {c["text"] for r in records for c in r["context"]}
        del records
        print(f"data {args.data} n={args.n} distinct_contexts={len(texts)} context_chars={sum(map(len, texts))}", file=sys.stderr)
        if args.only in (None, "ragmem"):
            compile_ragmem()
        runs: dict[str, list[dict]] = {}
        for repeat in range(args.repeats):  # interleaved: a slow minute of the machine falls on both sides
            if args.only in (None, "ragmem"):
                runs.setdefault("ragmem", []).append(run(sys.executable, _RAGMEM, str(path), str(args.resamples),
                                                         args.tokenizer, args.workers))
            if args.only in (None, "ragas"):
                runs.setdefault("ragas", []).append(run(ragas_python(), _RAGAS, str(path)))
            for name, done in runs.items():
                s = done[-1]
                print(f"repeat {repeat + 1} {name}: compute {s['compute']:.1f} s, {s['rss_mb']:.0f} MB", file=sys.stderr, flush=True)
    sides = {name: {key: min(s[key] for s in done) for key in ("compute", "total", "rss_mb")} for name, done in runs.items()}
    line = " | ".join(f"{name} compute={s['compute']:.1f} s total={s['total']:.1f} s rss={s['rss_mb']:.0f} MB"
                      for name, s in sides.items())
    if len(sides) == 2:
        a, b = sides["ragmem"], sides["ragas"]
        line += (f" | time {a['compute'] / b['compute']:.2f}x (total {a['total'] / b['total']:.2f}x) "
                 f"rss {a['rss_mb'] / b['rss_mb']:.2f}x (ragmem / ragas)")
    print(f"n={args.n} data={args.data} best of {args.repeats} tokenizer={args.tokenizer} workers={args.workers} {line}")

if __name__ == "__main__":
    main()
