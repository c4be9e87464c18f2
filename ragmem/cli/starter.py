"""``ragmem init``: make a folder a ragmem home (:mod:`ragmem.runtime.home`) with a starter config and five
examples, so that ``ragmem run ragmem.yaml`` works at once and shows the shape of one's own data.

Written: ``ragmem.toml`` (the home's marker), ``ragmem.yaml`` (replay the recorded answers, judge
offline by keyword overlap, every default metric) and ``data/examples.jsonl`` (five records in
ragmem's format: query, contexts with ids and sources, the recorded answer and latency, the
reference, the ids of the contexts that answer, a label). Nothing is overwritten: when any of them
exists, nothing is written and the error names it (``force=True`` replaces them).
"""

from __future__ import annotations

import json
from pathlib import Path

from ragmem.errors import RagmemError
from ragmem.runtime.home import MARKER

CONFIG_NAME = "ragmem.yaml"
DATA_NAME = "data/examples.jsonl"

_MARKER_TEXT = """\
# This folder is a ragmem home: every ragmem command started in it or in a folder below it keeps
# its runs here (the tracking store mlruns/, the working folder .ragmem/). Written by `ragmem init`.
format = 1
"""

_CONFIG_TEXT = """\
# A starter config written by `ragmem init`: replay the answers recorded in the data, judge them
# offline by keyword overlap, compute every default metric and log the run to ./mlruns.
#   ragmem run ragmem.yaml
# Every setting and its default: ragmem validate --show-config ragmem.yaml, and the documentation's
# configuration reference.
experiment: {experiment}
data:
  files:
    - data/examples.jsonl     # relative to this file; JSON, JSONL, CSV or Parquet
agent:
  type: replay                # the answers are in the data; or call your agent:
  # type: http                #   url: http://127.0.0.1:8000/answer
  # type: python              #   target: my_agent:answer
judge:
  type: keyword               # offline; an LLM judge on any OpenAI-compatible server:
  threshold: 0.5              #   type: llm, model: ..., base_url: http://127.0.0.1:11434/v1
"""

_EXAMPLES = [
    ("What does retrieval-augmented generation do?",
     [("c1", "rag", "Retrieval-augmented generation retrieves documents from a knowledge base and gives them to the model."),
      ("c2", "rag", "A vector store holds embeddings of the chunks."),
      ("c3", "memory_long", "The user prefers short answers.")],
     "It retrieves documents from a knowledge base and hands them to the model to answer from.",
     "RAG retrieves relevant documents from a knowledge base and gives them to the model to generate the answer.",
     ["c1"], 1, 820.0),
    ("Why rerank retrieved chunks?",
     [("c1", "rag", "A reranker scores each retrieved chunk against the query and reorders them."),
      ("c2", "rag", "Chunk size trades recall against precision."),
      ("c3", "memory_short", "The user asked about BM25 a moment ago.")],
     "A reranker reorders the retrieved chunks so the most relevant come first.",
     "A reranker scores the retrieved chunks against the query and puts the most relevant first.",
     ["c1"], 1, 1130.0),
    ("What does long-term memory keep?",
     [("c1", "memory_long", "Long-term memory keeps user preferences and facts across sessions."),
      ("c2", "memory_short", "Short-term memory keeps the last turns of this conversation.")],
     "It keeps the last few turns of the conversation.",
     "Long-term memory keeps user preferences and facts across sessions.",
     ["c1"], 1, 640.0),
    ("向量数据库的作用是什么？",
     [("c1", "rag", "向量数据库存储文本的embedding向量，支持近似最近邻搜索"),
      ("c2", "rag", "关键词检索常用BM25")],
     "向量数据库存储embedding向量并支持近似最近邻搜索",
     "向量数据库存储embedding向量，支持近似最近邻搜索",
     ["c1"], 1, 910.0),
    ("What is a good chunk size?",
     [("c1", "rag", "Chunks of 200 to 500 tokens with some overlap are a common starting point."),
      ("c2", "memory_long", "The user's documents are long PDF manuals.")],
     "Chunks of 200 to 500 tokens with some overlap are a common start.",
     "Always use chunks of exactly 1,000 characters.",  # a reference a person marked wrong
     ["c1"], 0, 1460.0),
]


def example_records() -> list[dict]:
    """The five starter examples, as written to ``data/examples.jsonl``."""
    return [{"id": f"ex-{i}", "query": query,
             "contexts": [{"id": cid, "source": source, "text": text} for cid, source, text in contexts],
             "generated_answer": answer, "reference_answer": reference, "relevant_context_ids": relevant,
             "label": label, "latency_ms": latency}
            for i, (query, contexts, answer, reference, relevant, label, latency) in enumerate(_EXAMPLES, 1)]


def init_home(folder: Path, force: bool = False) -> list[Path]:
    """Write the starter files into ``folder`` (made when missing); the paths written."""
    folder = Path(folder).resolve()
    if folder.exists() and not folder.is_dir():
        raise RagmemError(f"{folder}: not a folder")
    experiment = "".join(c if c.isalnum() or c in "-_" else "-" for c in folder.name) or "ragmem"
    files = {
        folder / MARKER: _MARKER_TEXT,
        folder / CONFIG_NAME: _CONFIG_TEXT.format(experiment=experiment),
        folder / DATA_NAME: "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in example_records()),
    }
    present = [path for path in files if path.exists()]
    if present and not force:
        raise RagmemError(f"{present[0]}: already exists; nothing was written (ragmem init --force replaces "
                          f"{', '.join(p.name for p in present)})")
    try:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise RagmemError(f"{folder}: cannot be written ({exc.strerror or exc})") from None
    return list(files)
