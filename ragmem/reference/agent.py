"""The reference agent: retrieve chunks, recall memories, generate, and time each stage."""

from __future__ import annotations

import time
from typing import Any

from ragmem.config.loading import as_section
from ragmem.config.settings import ReferenceSettings
from ragmem.reference.corpus import chunk_corpus, load_corpus
from ragmem.reference.generator import build_generator
from ragmem.reference.memory import BM25Memory, short_term
from ragmem.reference.retrievers import build_retriever, get_index, rankings_for
from ragmem.text.keywords import KeywordExtractor


class ReferenceAgent:
    """RAG over the bundled (or a given) corpus plus a two-level memory.

    Call it as ``agent(query, session_id=..., history=...)``; ``session_id`` names the user whose
    long-term memories are searched, ``history`` holds the session's earlier turns (short-term
    memory keeps the last ``memory.short_window``). Contexts come back round-robin by rank across
    sources (rag 1, memory_long 1, memory_short 1, rag 2, ...), each with ``id``, ``source`` and
    ``score``; timings: ``embed`` (query encoding), ``retrieve`` (chunk search), ``memory``
    (memory search), ``rerank``, ``llm`` (generation), in seconds.
    """

    def __init__(self, settings: ReferenceSettings | dict[str, Any]):
        """``settings``: the sections of :class:`ragmem.config.settings.ReferenceSettings` (a run's
        config, validated once, is one; a dict is validated here, missing sections take their defaults)."""
        s = settings if isinstance(settings, ReferenceSettings) else as_section(ReferenceSettings, settings, "")
        self.keywords = KeywordExtractor(s.keywords.tokenizer, s.keywords.stopwords)
        self.top_k = s.retriever.top_k
        self.reranker = s.retriever.reranker
        self.rerank_candidates = s.retriever.rerank_candidates
        self.short_window = s.memory.short_window
        self.long_top_k = s.memory.long_top_k
        corpus = load_corpus(s.corpus.path)
        size, overlap, kind, embeddings = s.corpus.chunk_size, s.corpus.chunk_overlap, s.retriever.type, s.embeddings
        key = (corpus.sha256, size, overlap, kind, self.keywords.signature(), embeddings.model, embeddings.base_url)

        def build():
            chunks = chunk_corpus(corpus, size, overlap)
            return chunks, build_retriever(kind, chunks, self.keywords, embeddings)

        (self.chunks, self.retriever), self.index_built = get_index(key, build)
        self.rankings = rankings_for(key, self.retriever)  # (a sweep's top_k grid: one retrieval per query)
        self.deepest = int(getattr(settings, "retrieval_depth", 0) or 0)
        self.memory = BM25Memory(self.keywords)
        for fact in corpus.memories:
            self.memory.add([{"content": fact["text"], "id": fact["id"]}], fact["user_id"], fact.get("timestamp"))
        self.generate = build_generator(s.generator, self.keywords)

    def _rerank(self, query: str, hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """Keyword reranker: share of the query's keywords each candidate holds; ties keep rank."""
        q = self.keywords(query)
        scored = [(i, len(q & self.keywords(self.chunks[i].text)) / len(q) if q else 0.0) for i, _ in hits]
        return [hit for _, hit in sorted(enumerate(scored), key=lambda p: (-p[1][1], p[0]))]

    def __call__(self, query: str, session_id: str | None = None, history: list | None = None) -> dict[str, Any]:
        timings: dict[str, float] = {}
        t = time.perf_counter()
        prepared = self.retriever.prepare(query)
        timings["embed"] = time.perf_counter() - t

        t = time.perf_counter()
        depth = max(self.top_k, self.rerank_candidates) if self.reranker != "none" else self.top_k
        hits = self.rankings.search(query, prepared, depth, self.deepest) if depth else []
        timings["retrieve"] = time.perf_counter() - t
        if self.reranker != "none":
            t = time.perf_counter()
            hits = self._rerank(query, hits)
            timings["rerank"] = time.perf_counter() - t
        hits = hits[: self.top_k]

        t = time.perf_counter()
        long_term = self.memory.search(query, session_id or "", self.long_top_k) if session_id else []
        recent = short_term(history, self.short_window)
        timings["memory"] = time.perf_counter() - t

        lists = [
            [{"id": self.chunks[i].id, "text": self.chunks[i].text, "source": "rag", "score": s} for i, s in hits],
            [{"id": m["id"], "text": m["text"], "source": "memory_long", "score": m["score"]} for m in long_term],
            [{**m, "source": "memory_short"} for m in recent],
        ]
        contexts = [lst[r] for r in range(max(map(len, lists), default=0)) for lst in lists if r < len(lst)]

        t = time.perf_counter()
        answer = self.generate(query, [c["text"] for c in contexts])
        timings["llm"] = time.perf_counter() - t
        return {"answer": answer, "contexts": contexts, "timings": timings}
