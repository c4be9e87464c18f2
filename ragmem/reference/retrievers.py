"""Retrievers over chunks: BM25, TF-IDF, dense embeddings, and hybrid (reciprocal rank fusion).

Each retriever is built once per distinct indexing setting (see :func:`get_index`) and answers
``search(query, top_k) -> [(chunk index, score)]``, best first, ties broken by chunk order.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections import OrderedDict
from typing import Any, Protocol, Sequence

import numpy as np

from ragmem.clients import calls
from ragmem.clients.endpoints import Breaker, OPENAI_URL, sdk_target
from ragmem.errors import ConfigError
from ragmem.reference.corpus import Chunk
from ragmem.text.keywords import KeywordExtractor

RETRIEVER_TYPES = ("bm25", "tfidf", "dense", "hybrid")
RRF_K = 60  # the constant of Cormack et al. (2009); ranks matter, scores do not


class Retriever(Protocol):
    """``prepare`` encodes the query (tokens, a sparse or a dense vector: the agent's ``embed``
    stage); ``search`` ranks chunks for the prepared query (its ``retrieve`` stage)."""

    def prepare(self, query: str) -> Any: ...

    def search(self, prepared: Any, top_k: int) -> list[tuple[int, float]]: ...


def import_bm25s():
    """bm25s sets its logger to DEBUG when imported ("Building index from tokens" for every index);
    that is noise in a user's terminal."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


def _top(scores: np.ndarray, top_k: int) -> list[tuple[int, float]]:
    order = np.lexsort((np.arange(len(scores)), -scores))[:top_k]
    return [(int(i), float(scores[i])) for i in order if scores[i] > 0]


class BM25Retriever:
    """bm25s over jieba/word tokens (the keyword tokenizer, stopwords removed)."""

    prefix_stable = True  # (_top: a deeper ranking's prefix is the shallower one: Rankings)

    def __init__(self, chunks: Sequence[Chunk], keywords: KeywordExtractor, k1: float = 1.5, b: float = 0.75):
        bm25s = import_bm25s()
        self.keywords = keywords
        self.model = bm25s.BM25(k1=k1, b=b)
        # the tokens interned: 200,000 chunks held 0.37 GB of separate copies of a few thousand words
        self.model.index([[sys.intern(t) for t in keywords.tokens(c.text)] or ["<empty>"] for c in chunks],
                         show_progress=False)
        self.vocab = set(self.model.vocab_dict)
        self.n = len(chunks)

    def prepare(self, query: str) -> list[str]:
        return [t for t in self.keywords.tokens(query) if t in self.vocab]

    def search(self, prepared: list[str], top_k: int) -> list[tuple[int, float]]:
        if not prepared:
            return []
        return _top(np.asarray(self.model.get_scores(prepared), dtype=float), top_k)


class TfidfRetriever:
    """scikit-learn TF-IDF (sublinear tf) over the same tokens; cosine similarity."""

    prefix_stable = True  # (_top: a deeper ranking's prefix is the shallower one: Rankings)

    def __init__(self, chunks: Sequence[Chunk], keywords: KeywordExtractor):
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vectorizer = TfidfVectorizer(analyzer=keywords.tokens, sublinear_tf=True)
        self.matrix = self.vectorizer.fit_transform([c.text for c in chunks])

    def prepare(self, query: str):
        return self.vectorizer.transform([query])

    def search(self, prepared, top_k: int) -> list[tuple[int, float]]:
        return _top((self.matrix @ prepared.T).toarray().ravel(), top_k)


class DenseRetriever:
    """Cosine similarity of embeddings from an OpenAI-compatible endpoint or a local
    sentence-transformers model (``embeddings.model`` = ``local:NAME``)."""

    prefix_stable = True  # (_top: a deeper ranking's prefix is the shallower one: Rankings)

    def __init__(self, chunks: Sequence[Chunk], settings):
        self.embed = make_embedder(settings)
        vectors = self.embed([c.text for c in chunks])
        self.matrix = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def prepare(self, query: str) -> np.ndarray:
        q = self.embed([query])[0]
        return q / max(np.linalg.norm(q), 1e-12)

    def search(self, prepared: np.ndarray, top_k: int) -> list[tuple[int, float]]:
        return _top(self.matrix @ prepared, top_k)


def make_embedder(settings):
    """texts -> array of vectors, from ``embeddings.{model, base_url, api_key_env}``."""
    model = settings.model
    if not model:
        raise ConfigError("embeddings.model: required for the dense retriever (an embeddings model name, "
                          "or local:NAME for a sentence-transformers model)")
    if str(model).startswith("local:"):
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise ConfigError("embeddings.model: local models need sentence-transformers "
                              "(pip install sentence-transformers)") from None
        st = SentenceTransformer(str(model)[6:])
        return lambda texts: np.asarray(st.encode(list(texts)), dtype=float)
    from openai import OpenAI

    key_env = settings.api_key_env or "OPENAI_API_KEY"
    # the SDK's own retries are off: the one call policy retries, and feeds the breaker
    base_url, query = sdk_target(settings.base_url)  # (a ?api_key= of the URL: every request's query)
    client = OpenAI(base_url=base_url, api_key=os.environ.get(key_env) or "not-needed", default_query=query,
                    timeout=settings.timeout_s, max_retries=0)
    policy = calls.policy_of(settings)
    breaker = Breaker("embeddings.base_url", settings.base_url or OPENAI_URL)

    def embed(texts):
        vectors = []
        texts = list(texts)
        for start in range(0, len(texts), 64):
            batch = texts[start:start + 64]
            reply = calls.call(lambda: client.embeddings.create(model=model, input=batch), policy, breaker)  # noqa: B023
            vectors.extend(item.embedding for item in sorted(reply.data, key=lambda d: d.index))
        return np.asarray(vectors, dtype=float)

    return embed


class HybridRetriever:
    """Reciprocal rank fusion: ``score(d) = Σ_r 1 / (RRF_K + rank_r(d))`` over the member retrievers."""

    def __init__(self, members: Sequence[Retriever], depth: int = 50):
        self.members, self.depth = list(members), depth

    def prepare(self, query: str) -> list[Any]:
        return [member.prepare(query) for member in self.members]

    def search(self, prepared: list[Any], top_k: int) -> list[tuple[int, float]]:
        fused: dict[int, float] = {}
        for member, query in zip(self.members, prepared):
            for rank, (index, _) in enumerate(member.search(query, max(self.depth, top_k)), 1):
                fused[index] = fused.get(index, 0.0) + 1.0 / (RRF_K + rank)
        return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]


def build_retriever(kind: str, chunks: Sequence[Chunk], keywords: KeywordExtractor,
                    embeddings) -> Retriever:
    """The retriever named by ``retriever.type``; ``embeddings`` are the embeddings settings."""
    if kind == "bm25":
        return BM25Retriever(chunks, keywords)
    if kind == "tfidf":
        return TfidfRetriever(chunks, keywords)
    if kind == "dense":
        return DenseRetriever(chunks, embeddings)
    if kind == "hybrid":
        members: list[Retriever] = [BM25Retriever(chunks, keywords), TfidfRetriever(chunks, keywords)]
        if embeddings.model:
            members.append(DenseRetriever(chunks, embeddings))
        return HybridRetriever(members)
    raise ConfigError(f"retriever.type: unknown retriever {kind!r}; available: {', '.join(RETRIEVER_TYPES)}")


_INDEX_CACHE_SIZE = 16  # distinct indexing settings kept per process (least recently used go first)
_INDEXES: "OrderedDict[tuple, Any]" = OrderedDict()
_INDEX_LOCK = threading.Lock()


def get_index(key: tuple, build) -> tuple[Any, bool]:
    """The index for one indexing setting, built once and shared by every agent (and every sweep
    child) with that setting; returns ``(index, built)`` where ``built`` tells whether this call
    built it (each run reports its own builds; there is no process-wide counter to race on).
    At most ``_INDEX_CACHE_SIZE`` indexes are kept."""
    with _INDEX_LOCK:
        if key in _INDEXES:
            _INDEXES.move_to_end(key)
            return _INDEXES[key], False
        index = _INDEXES[key] = build()
        while len(_INDEXES) > _INDEX_CACHE_SIZE:
            _INDEXES.popitem(last=False)
        return index, True


class Rankings:
    """The rankings one index gave, by query, shared by every agent (every sweep child) with that index:
    a query asked again at the same depth or less is the cached ranking's prefix (a ranking's prefix is
    the smaller ranking: ``_top`` orders by score then chunk, a total order), so a ``retriever.top_k``
    grid retrieves once per (index, query) at its deepest ``top_k`` (``retrieval_depth``, set by the
    sweep's plan), never once per configuration. ``searches`` counts the retrievals made. A retriever
    whose ranking is not a prefix of a deeper one (hybrid: its fused pool grows with the depth) is
    asked every time."""

    def __init__(self, retriever: Any):
        self.retriever, self.searches = retriever, 0
        self.shared = getattr(retriever, "prefix_stable", False)
        self._held: dict[str, tuple[int, list[tuple[int, float]]]] = {}  # query -> (depth asked, ranking)
        self._lock = threading.Lock()

    def search(self, query: str, prepared: Any, depth: int, deepest: int = 0) -> list[tuple[int, float]]:
        """The top ``depth`` of ``query`` (``prepared`` by the retriever), retrieved at ``max(depth,
        deepest)`` when it is not held deep enough."""
        if not self.shared:
            self.searches += 1
            return self.retriever.search(prepared, depth)
        with self._lock:
            held = self._held.get(query)
        if held is None or held[0] < depth:
            asked = max(depth, deepest)
            held = (asked, self.retriever.search(prepared, asked))
            with self._lock:
                self.searches += 1
                self._held[query] = held
        return held[1][:depth]


def rankings_for(key: tuple, retriever: Any) -> Rankings:
    """The :class:`Rankings` of the index ``key`` (made with it, gone with it)."""
    with _INDEX_LOCK:
        entry = _INDEXES.get(key)
        if isinstance(entry, tuple) and len(entry) == 2 and entry[1] is retriever:
            found = _RANKINGS.get(key)
            if found is None or found.retriever is not retriever:
                found = _RANKINGS[key] = Rankings(retriever)
            for gone in [k for k in _RANKINGS if k not in _INDEXES]:
                del _RANKINGS[gone]
            return found
    return Rankings(retriever)  # (an index no longer cached: its own)


_RANKINGS: dict[tuple, Rankings] = {}
