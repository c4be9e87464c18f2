"""Parity of rjieba with jieba (the reference) on a Chinese corpus: tokens, keyword sets, entities,
and every metric of a run.

    python benchmarks/bench_segmenters.py [--cmrc PATH/cmrc2018_dev.json] [--n 3000]

The corpus is CMRC 2018's dev set when given (Chinese Wikipedia paragraphs with questions and
answers, squad-style JSON from github.com/ymcui/cmrc2018; read in place, not copied), else N
synthetic bilingual examples of ``bench_vs_ragas.py``. Every distinct text is tokenized by ragmem's
tokenizer with each segmenter (non-CJK runs are ragmem's own regex either way), and its keyword
set and offline entity set compared. Then one replay evaluation per segmenter is run on examples
built from the corpus (question, the reference answer, a generated answer taken from the
paragraph's sentence that holds the answer, the paragraph and another one as contexts) and every
metric compared. Prints one line, e.g.
``texts=9100 tokens_same=99.1% keywords_same=99.3% entities_same=71.2% metrics_max_abs_diff=0.0041 (bleu_1)``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def cmrc_examples(path: Path, limit: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    paragraphs = [p for article in data for p in article["paragraphs"]]
    out = []
    for i, paragraph in enumerate(paragraphs):
        sentences = re.findall(r"[^。！？]+[。！？]?", paragraph["context"])
        for qa in paragraph["qas"]:
            answer = qa["answers"][0]["text"]
            holding = next((s for s in sentences if answer in s), answer)
            other = paragraphs[rng.randrange(len(paragraphs))]["context"]
            out.append({"id": qa["id"], "query": qa["question"], "reference_answer": answer,
                        "generated_answer": holding, "label": 1,
                        "context": [{"id": f"p{i}", "text": paragraph["context"]}, {"id": "other", "text": other}],
                        "relevant_context_ids": [f"p{i}"]})
            if len(out) >= limit:
                return out
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cmrc", type=Path, help="cmrc2018_dev.json (squad-style)")
    parser.add_argument("--n", type=int, default=3000)
    args = parser.parse_args()
    import ragmem
    from ragmem.metrics.rag import OfflineEntities
    from ragmem.text.keywords import KeywordExtractor

    if args.cmrc:
        records = cmrc_examples(args.cmrc, args.n)
    else:
        from bench_vs_ragas import synthetic

        records = synthetic(args.n)
    texts = sorted({t for r in records for t in (r["query"], r["reference_answer"], r["generated_answer"],
                                                 *(c["text"] for c in r["context"]))})
    K = {name: KeywordExtractor(name) for name in ("jieba", "rjieba")}
    E = {name: OfflineEntities(K[name].stopwords, K[name].tokenizer) for name in K}
    tokens = sum(K["jieba"].tokenizer(t) == K["rjieba"].tokenizer(t) for t in texts)
    keywords = sum(K["jieba"](t) == K["rjieba"](t) for t in texts)
    entities = sum(E["jieba"](t) == E["rjieba"](t) for t in texts)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.json"
        path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
        runs = {name: ragmem.evaluate(str(path), track=False, keywords={"tokenizer": name},
                                      generation={"tokenizer": name}, stats={"resamples": 0}).metrics for name in K}
    diffs = {m: abs(v - runs["rjieba"][m]) for m, v in runs["jieba"].items()
             if isinstance(v, float) and isinstance(runs["rjieba"].get(m), float)}
    worst = max(diffs, key=diffs.get)
    by_metric = " ".join(f"{m}={diffs[m]:.4f}" for m in ("reference_coverage", "bleu", "rouge_l", "token_f1",
                                                          "context_entity_recall", "pass_rate") if m in diffs)
    print(f"corpus={'cmrc2018-dev' if args.cmrc else 'synthetic'} examples={len(records)} texts={len(texts)} "
          f"tokens_same={tokens / len(texts):.1%} keywords_same={keywords / len(texts):.1%} "
          f"entities_same={entities / len(texts):.1%} metrics_max_abs_diff={diffs[worst]:.4f} ({worst}) {by_metric}")


if __name__ == "__main__":
    main()
