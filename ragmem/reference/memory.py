"""The memory layer: short-term (the session's last turns) and long-term (facts from earlier
sessions, searched per user).

:class:`MemoryLayer` is the interface, shaped like the common memory APIs (mem0 and others):
``add(messages, user_id, timestamp)``, ``search(query, user_id, top_k)`` and optional ``reset``,
``update(memory_id, text, user_id)`` and ``delete(memory_id, user_id)`` (the lifecycle suite uses them).
The reference implementation keeps facts in memory and ranks them with BM25.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, Sequence

from ragmem.reference.retrievers import import_bm25s
from ragmem.text.keywords import KeywordExtractor


class MemoryLayer(Protocol):
    def add(self, messages: Sequence[dict[str, str]], user_id: str, timestamp: str | None = None) -> None: ...

    def search(self, query: str, user_id: str, top_k: int) -> list[dict[str, Any]]: ...

    def reset(self) -> None: ...


class BM25Memory:
    """Long-term memory: every added message is a fact of its user; search ranks that user's facts
    with BM25 (bm25s) over keyword tokens. The per-user index is rebuilt lazily after adds."""

    def __init__(self, keywords: KeywordExtractor):
        self.keywords = keywords
        self._facts: dict[str, list[dict[str, Any]]] = {}
        self._index: dict[str, Any] = {}
        self._lock = threading.Lock()

    def add(self, messages: Sequence[dict[str, str]], user_id: str, timestamp: str | None = None) -> None:
        with self._lock:
            facts = self._facts.setdefault(user_id, [])
            for message in messages:
                fid = message.get("id") or f"{user_id}-m{len(facts)}"
                facts.append({"id": fid, "text": message["content"], "timestamp": message.get("timestamp", timestamp)})
            self._index.pop(user_id, None)

    def _user_index(self, user_id: str):
        with self._lock:
            if user_id not in self._index:
                bm25s = import_bm25s()
                facts = self._facts.get(user_id, [])
                model = bm25s.BM25()
                if facts:
                    model.index([self.keywords.tokens(f["text"]) or ["<empty>"] for f in facts], show_progress=False)
                self._index[user_id] = (model, set(model.vocab_dict) if facts else set(), facts)
            return self._index[user_id]

    def search(self, query: str, user_id: str, top_k: int) -> list[dict[str, Any]]:
        if top_k <= 0:
            return []
        model, vocab, facts = self._user_index(user_id)
        tokens = [t for t in self.keywords.tokens(query) if t in vocab]
        if not facts or not tokens:
            return []
        scores = model.get_scores(tokens)
        order = sorted(range(len(facts)), key=lambda i: (-scores[i], i))[:top_k]
        return [{**facts[i], "score": float(scores[i])} for i in order if scores[i] > 0]

    def delete(self, memory_id: str, user_id: str) -> None:
        """Forget one memory of the user (its id as :meth:`search` returns it)."""
        with self._lock:
            self._facts[user_id] = [f for f in self._facts.get(user_id, []) if f["id"] != memory_id]
            self._index.pop(user_id, None)

    def update(self, memory_id: str, text: str, user_id: str) -> None:
        """Rewrite one memory of the user to ``text`` (a changed fact replaces the old one)."""
        with self._lock:
            for fact in self._facts.get(user_id, []):
                if fact["id"] == memory_id:
                    fact["text"] = text
            self._index.pop(user_id, None)

    def reset(self) -> None:
        with self._lock:
            self._facts.clear()
            self._index.clear()


def short_term(history: Sequence[dict[str, str]] | None, window: int) -> list[dict[str, Any]]:
    """The last ``window`` turns of the session, most recent first, ids ``turn-{index}``."""
    if not history or window <= 0:
        return []
    start = max(0, len(history) - window)
    turns = [{"id": f"turn-{i}", "text": t["content"], "score": None} for i, t in enumerate(history) if i >= start]
    return list(reversed(turns))
