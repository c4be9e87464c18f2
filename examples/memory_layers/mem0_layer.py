"""mem0 (``mem0ai`` 2.2) as a ragmem memory layer, for ``ragmem bench-memory``.

    pip install 'ragmem[mem0]'
    ragmem bench-memory examples/memory_layers/mem0.yaml --limit-conversations 1

Two modes (``params.mode``):

- ``raw`` (``infer=False``): every turn is stored as it is, one ``add`` per turn, with the turn's
  ``dia_id`` in the memory's metadata, so ``search`` returns the evidence ids ragmem scores
  ``evidence_recall`` with. Needs an embedding model only.
- ``extract`` (``infer=True``): mem0's LLM extracts facts from each session and decides what to add,
  update or delete. Needs a capable chat model with a context of about 9k tokens (mem0's extraction
  prompt is long); a 135M model does not follow it. Extracted facts carry no turn ids: ragmem reports
  their ``evidence_recall`` as null (undefined), counted in ``n_evidence_undefined``.

What the adapter bridges:
- the speaker: ragmem sends it as ``name`` (mem0 reads it there) and as ``speaker``;
- mem0 OSS rejects ``add(timestamp=...)`` (a Platform parameter): the session date goes to metadata;
- mem0 2.x searches with ``filters={"user_id": ...}`` and returns ``{"results": [{"memory", ...}]}``:
  mapped to ragmem's ``[{text, id, score, memory_id}]`` (``id`` the turn's, for recall; ``memory_id``
  mem0's own, which ``update`` and ``delete`` take: the lifecycle suite calls them);
- telemetry is off unless ``MEM0_TELEMETRY`` says otherwise (a benchmark sends nothing home).

``params``: ``mode``, ``embedder`` and ``llm`` (mem0 provider configs: ``{"provider": "openai",
"config": {"model", "openai_base_url", "api_key", "embedding_dims"}}`` reaches any OpenAI-compatible
server: Ollama, vLLM, llama.cpp), ``embedding_dims`` and ``path`` (where the local qdrant store and
mem0's history database live; a temporary folder by default).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")  # read by mem0 when it is imported


class Mem0Layer:
    def __init__(self, mode: str = "raw", embedder: dict[str, Any] | None = None, llm: dict[str, Any] | None = None,
                 embedding_dims: int = 1536, path: str | None = None, collection: str = "ragmem_bench"):
        from mem0 import Memory

        if mode not in ("raw", "extract"):
            raise ValueError(f"mode: expected raw or extract, got {mode!r}")
        self.infer = mode == "extract"
        self.path = path or tempfile.mkdtemp(prefix="ragmem-mem0-")
        config: dict[str, Any] = {
            "vector_store": {"provider": "qdrant", "config": {"collection_name": collection, "path": self.path,
                                                               "embedding_model_dims": embedding_dims,
                                                               "on_disk": True}},
            "history_db_path": os.path.join(self.path, "history.db"),
        }
        if embedder:
            config["embedder"] = embedder
        if llm:
            config["llm"] = llm
        self.memory = Memory.from_config(config)

    def add(self, messages: list[dict[str, Any]], user_id: str, timestamp: str | None = None) -> None:
        turns = [{"role": m.get("role", "user"), "content": m["content"], "name": m.get("name") or m.get("speaker")}
                 for m in messages]
        if self.infer:  # one call per session: mem0 extracts the facts
            self.memory.add(turns, user_id=user_id, infer=True, metadata={"session_date": timestamp})
            return
        for turn, message in zip(turns, messages):  # one call per turn: each memory keeps its turn id
            self.memory.add([turn], user_id=user_id, infer=False,
                            metadata={"dia_id": message.get("id"), "session_date": timestamp})

    def search(self, query: str, user_id: str, top_k: int) -> list[dict[str, Any]]:
        found = self.memory.search(query, top_k=top_k, filters={"user_id": user_id}, threshold=0.0)
        results = found.get("results", []) if isinstance(found, dict) else found
        return [{"text": r.get("memory", ""), "id": (r.get("metadata") or {}).get("dia_id"), "score": r.get("score"),
                 "memory_id": r.get("id")} for r in results]

    def update(self, memory_id: str, text: str, user_id: str) -> None:
        """mem0's own update of one memory (the lifecycle suite: a changed fact)."""
        self.memory.update(memory_id, text)

    def delete(self, memory_id: str, user_id: str) -> None:
        """mem0's own delete of one memory (the lifecycle suite: a request to forget)."""
        self.memory.delete(memory_id)

    def reset(self) -> None:
        self.memory.reset()
