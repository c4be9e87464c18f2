"""The reference agent: chunking, retrievers, reranker, memory, timings, index reuse, dense retrieval
through a local OpenAI-compatible embeddings server."""

import hashlib

import pytest

from ragmem.config.loading import DEFAULTS
from ragmem.errors import ConfigError
from ragmem.reference.agent import ReferenceAgent
from ragmem.reference.corpus import chunk_text
from tests.openai_stub import Stub


def settings(**changes):
    base = {k: dict(DEFAULTS[k]) for k in ("corpus", "retriever", "memory", "generator", "embeddings", "keywords")}
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        base[section][key] = value
    return base


@pytest.mark.parametrize("text, size, overlap, expected", [
    ("abcdefghij", 4, 0, ["abcd", "efgh", "ij"]),
    ("abcdefghij", 4, 2, ["abcd", "cdef", "efgh", "ghij"]),
    ("第一句。第二句。第三句。", 9, 0, ["第一句。第二句。", "第三句。"]),   # ends moved back to a sentence end
    ("One. Two. Three.", 100, 10, ["One. Two. Three."]),
])
def test_chunking(text, size, overlap, expected):
    assert chunk_text(text, size, overlap) == expected


def test_bad_chunking_is_a_config_error():
    with pytest.raises(ConfigError, match="chunk_overlap"):
        chunk_text("abc", 4, 4)


@pytest.mark.parametrize("kind", ["bm25", "tfidf", "hybrid"])
def test_retrievers_find_the_document(kind):
    agent = ReferenceAgent(settings(retriever__type=kind, retriever__top_k=3))
    reply = agent("BM25的参数b控制什么？", session_id="u-zh")
    rag = [c for c in reply["contexts"] if c["source"] == "rag"]
    assert len(rag) == 3 and rag[0]["id"].startswith("zh-03#") and rag[0]["score"] > 0
    assert set(reply["timings"]) == {"embed", "retrieve", "memory", "llm"}
    assert reply["answer"] == "参数b控制文档长度归一化的强度。"


def test_memory_layers_and_round_robin_order():
    agent = ReferenceAgent(settings(memory__short_window=2, memory__long_top_k=1, retriever__top_k=2))
    history = [{"role": "user", "content": "我们的数据集有三千条样本。"}, {"role": "assistant", "content": "好的。"},
               {"role": "user", "content": "结果周五发出。"}]
    reply = agent("我偏好哪个向量数据库？", session_id="u-zh", history=history)
    sources = [c["source"] for c in reply["contexts"]]
    assert sources[:3] == ["rag", "memory_long", "memory_short"]
    assert [c["id"] for c in reply["contexts"] if c["source"] == "memory_short"] == ["turn-2", "turn-1"]
    assert [c["id"] for c in reply["contexts"] if c["source"] == "memory_long"] == ["mem-zh-1"]
    assert "Qdrant" in reply["answer"]
    assert ReferenceAgent(settings(memory__long_top_k=2))("Which database?", session_id="nobody")["contexts"][0]["source"] == "rag"


def test_keyword_reranker_reports_its_stage():
    query = "Which BM25 parameter controls document length normalisation?"
    reply = ReferenceAgent(settings(retriever__reranker="keyword", retriever__top_k=2))(query)
    assert "rerank" in reply["timings"]
    rag = [c for c in reply["contexts"] if c["source"] == "rag"]
    assert rag[0]["id"].startswith("en-03#") and all(0 <= c["score"] <= 1 for c in rag)  # keyword shares
    assert [c["score"] for c in rag] == sorted((c["score"] for c in rag), reverse=True)
    with pytest.raises(ConfigError, match="retriever.reranker"):
        ReferenceAgent(settings(retriever__reranker="magic"))


def test_index_is_built_once_per_indexing_setting():
    first = ReferenceAgent(settings(corpus__chunk_size=123))
    again = ReferenceAgent(settings(corpus__chunk_size=123, retriever__top_k=1, memory__short_window=1))
    other = ReferenceAgent(settings(corpus__chunk_size=124))
    assert (first.index_built, again.index_built, other.index_built) == (True, False, True)
    assert again.retriever is first.retriever and other.retriever is not first.retriever


def test_index_cache_is_bounded():
    from ragmem.reference import retrievers

    for size in range(300, 300 + retrievers._INDEX_CACHE_SIZE + 3):
        ReferenceAgent(settings(corpus__chunk_size=size))
    assert len(retrievers._INDEXES) == retrievers._INDEX_CACHE_SIZE


def _vector(text):
    """A deterministic 'embedding': hashed character bigrams, so similar texts are close."""
    vector = [0.0] * 64
    for a, b in zip(text, text[1:]):
        vector[int(hashlib.md5((a + b).encode()).hexdigest(), 16) % 64] += 1.0
    return vector


def test_dense_retriever_through_an_openai_compatible_endpoint():
    with Stub(embed=_vector) as stub:
        agent = ReferenceAgent(settings(retriever__type="dense", retriever__top_k=2, embeddings__model="embed-test",
                                        embeddings__base_url=stub.base_url, corpus__chunk_size=150))
        reply = agent("BM25是一种基于词频和逆文档频率的稀疏检索算法")
        assert any(r.get("input") for r in stub.requests)
    assert reply["contexts"][0]["id"].startswith("zh-03#")
