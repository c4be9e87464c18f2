"""A scripted writer and judge for ``ragmem generate`` (served by tests.openai_stub.Stub), and a small
bilingual corpus whose documents carry planted markers, each making one check fail:

- ``LANGPLANT``: the question comes back in Chinese for an English passage (``language``);
- ``SELFPLANT``: the question points at "the passage" it was written from (``standalone``);
- ``DUPPLANT``: two documents whose questions are word for word the same (``duplicate``);
- ``GROUNDPLANT``: an answer that is not in the passage, which the judge does not support (``grounded``);
- ``UNANSPLANT``: the judge, given the passage, finds no answer (``answerable``);
- ``TRAPPLANT``: an unanswerable question whose answer the corpus holds (``answerable``, the other way).

Every other request passes: the scripted judge is well-behaved, the planted documents are not.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.openai_stub import data_block, user_text

ENGLISH = {
    "alpha": "Zorblat caches query plans in memory. Its cache holds ten thousand plans.",
    "beta": "Quillon indexes documents nightly. Indexing takes forty minutes on one core.",
    "gamma": "Marvex reranks the top fifty chunks. The reranker adds thirty milliseconds.",
    "delta": "Tessary stores embeddings on disk. Each embedding has 768 dimensions.",
    "epsilon": "Vornik splits documents into chunks of 200 characters. Chunks overlap by 40 characters.",
    "zeta": "Pellucid retries failed requests three times. The backoff doubles after each retry.",
    "eta": "Drovane answers in English and Chinese. It detects the language of each query.",
    "theta": "Kestrel logs every request to MLflow. The logs keep the latency of each stage.",
    "lang": "Ostrava compresses vectors with product quantization LANGPLANT. Compression saves memory.",
    "dup1": "Halvard shards the index by tenant DUPPLANT. Each shard lives on its own node.",
    "dup2": "Brisco shards the cache by region DUPPLANT. Each shard has a replica.",
    "ground": "Fenwick limits each user to 100 queries per minute GROUNDPLANT. Extra queries wait.",
    "unans": "Galloway UNANSPLANT prefers short questions. Long questions are truncated.",
    "trap": "Hollis was founded in 1999 TRAPPLANT. It began as a search company.",
    "self": "Wexford SELFPLANT mirrors the index to a second region. Failover takes two minutes.",
}
CHINESE = {
    "zh1": "知源系统每天夜里重建索引。重建一次需要四十分钟。",
    "zh2": "问澜服务把文档切成两百字的块。相邻的块重叠四十字。",
    "zh3": "星图检索器先召回五十个候选。重排序再挑出前五个。",
    "zh4": "墨池缓存保存一万条查询计划。缓存满了就淘汰最旧的。",
}


def write_corpus(folder: Path) -> Path:
    """The corpus as a folder of .txt files (one chunk each at the default chunking)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in {**ENGLISH, **CHINESE}.items():
        (folder / f"{name}.txt").write_text(text, encoding="utf-8")
    return folder


def _subject(passage: str) -> str:
    return passage.split()[0] if re.match(r"[A-Za-z]", passage) else passage[:2]


def _zh(text: str) -> bool:
    return bool(re.search(r"[\u4e00-\u9fff]", text))


def _write(request: dict, text: str) -> dict:
    first = data_block(request, "passage" if '<data name="passage">' in text else "passage_1")
    name = _subject(first)
    sentences = [s for s in re.split(r"(?<=[.。])\s*", first) if s]
    if "does not answer" in text:  # write_unanswerable
        return ({"question": f"{name}是哪一年成立的？", "answer": "成立年份"} if _zh(first)
                else {"question": f"In what year was {name} founded?", "answer": "the founding year"})
    if "LANGPLANT" in first:
        return {"question": "这个系统怎样压缩向量？", "answer": "product quantization"}
    if "DUPPLANT" in first:
        return {"question": "How are the shards of the service laid out?", "answer": "Each shard"}
    if "SELFPLANT" in first:
        return {"question": "What does the passage say about failover?", "answer": "Failover takes two minutes"}
    if "GROUNDPLANT" in first:
        return {"question": f"What does {name} do with the extra queries?", "answer": "purple elephants dance"}
    if '<data name="passage_2">' in text:
        other = _subject(data_block(request, "passage_2"))
        kind = "compare" if "compares" in text else "link"
        return ({"question": f"{name}和{other}有什么{'不同' if kind == 'compare' else '联系'}？", "answer": sentences[0]}
                if _zh(first) else {"question": f"How do {name} and {other} {kind}?", "answer": sentences[0]})
    return ({"question": f"{name}做什么？", "answer": sentences[0]} if _zh(first)
            else {"question": f"What does {name} do?", "answer": sentences[0]})


def chat(request: dict) -> dict:
    """The scripted endpoint: writes questions, answers from contexts, judges claims and answers."""
    text = user_text(request)
    if "Write one question" in text:
        return _write(request, text)
    if text.startswith("Answer the question using only the contexts"):
        contexts, question = data_block(request, "contexts"), data_block(request, "question")
        if "UNANSPLANT" in contexts:
            return {"answerable": 0, "answer": ""}
        if "founded" in question or "成立" in question:
            trapped = "TRAPPLANT" in contexts and "Hollis" in question
            return {"answerable": 1, "answer": "1999"} if trapped else {"answerable": 0, "answer": ""}
        return {"answerable": 1, "answer": "as the contexts say"}
    if text.startswith("Decide whether the claim"):
        claim = data_block(request, "claim")
        return {"verdict": "no" if "elephants" in claim else "yes", "reason": "scripted"}
    if text.startswith("Decide whether the generated answer"):
        return {"verdict": "yes", "reason": "scripted"}
    raise AssertionError(f"unexpected request: {text[:80]}")
