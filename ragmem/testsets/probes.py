"""Offline retrieval probes (``ragmem generate --offline``): for each sampled chunk, a query made of its
most distinctive terms, with that chunk as the one relevant context. No LLM is called.

A chunk's terms are its keywords (the metrics' tokenizer and stopwords: :mod:`ragmem.text.keywords`),
weighted by how distinctive they are in the corpus::

    weight(t, c) = tf(t, c) * log(N / df(t))      N chunks, df(t) chunks holding t

A probe takes two of the chunk's top terms (the first pair for its first probe, the next pairs when
a chunk is probed again) and puts them in a template of the chunk's language (Chinese when more than
a fifth of its letters are CJK). Chunks are sampled evenly across documents: documents in a seeded
order, one chunk of each in turn, each document's chunks in a seeded order; a corpus with fewer
chunks than probes asked gives each chunk more probes (other term pairs), and never the same query
twice.

What they are, honestly: keyword probes, not natural questions. They measure whether a retriever
finds the passage that holds a pair of its distinctive words: the ranking metrics of any retriever
with no labels. How hard they are is measured and said: the share of probes whose chunk the BM25
reference retriever ranks first (:func:`bm25_first`).
"""

from __future__ import annotations

import collections
import heapq
import itertools
import math
import random
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ragmem.reference.corpus import Chunk
from ragmem.reference.retrievers import BM25Retriever
from ragmem.text.keywords import KeywordExtractor
from ragmem.version import __version__

GENERATOR = "offline-probe-2026-12-04.1"
TOP = 10  # a chunk's terms kept: a probe pairs the first six, a two-chunk question links by the ten
TEMPLATES = {
    "en": ("What does the text say about {a} and {b}?", "Which passage covers {a} and {b}?",
           "{a} and {b}: where is this explained?"),
    "zh": ("关于{a}和{b}，文中是怎么说的？", "哪一段讲到了{a}和{b}？", "{a}与{b}在哪里有说明？"),
}
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LETTER = re.compile(r"\w")


def language(text: str) -> str:
    """``zh`` when more than a fifth of the letters are CJK, else ``en``.

    >>> language("检索增强生成 (RAG) first retrieves"), language("BM25 ranks 文档")
    ('zh', 'en')
    """
    letters = len(_LETTER.findall(text)) or 1
    return "zh" if len(_CJK.findall(text)) / letters > 0.2 else "en"


@dataclass(frozen=True)
class Probe:
    query: str
    chunk: Chunk
    terms: tuple[str, str]
    template: int
    language: str


def distinctive(chunks: Sequence[Chunk], keywords: KeywordExtractor, top: int = TOP,
                advance: Callable[[int], None] = lambda n: None) -> list[list[str]]:
    """Each chunk's ``top`` terms, most distinctive first (module docstring); ties by the term itself.

    Two passes, so that a large corpus is held once: the chunks' tokens (interned, as tuples) and
    the document frequencies first, then each chunk's weights, of which only the ``top`` are kept
    (200,000 chunks: 0.37 GB with a counter per chunk kept whole, measured with
    benchmarks/bench_generate_memory.py). ``advance(1)`` after each chunk's tokens."""
    df: collections.Counter[str] = collections.Counter()
    held: list[tuple[str, ...]] = []
    for chunk in chunks:
        tokens = tuple(sys.intern(t) for t in keywords.tokens(chunk.text) if _usable(t))
        held.append(tokens)
        df.update(set(tokens))
        advance(1)
    n = len(chunks)
    out = []
    for i, tokens in enumerate(held):
        counter = collections.Counter(tokens)
        weight = ((lambda t: (-counter[t] * math.log(n / df[t]), t)) if n > 1  # noqa: B023  (used in this turn)
                  else (lambda t: (-counter[t], t)))  # noqa: B023
        out.append(heapq.nsmallest(top, counter, key=weight))
        held[i] = ()  # (each chunk's tokens let go once weighed)
    return out


def _usable(term: str) -> bool:
    """A term a probe may name: more than one character unless CJK, not a bare number."""
    return not term.isdigit() and (len(term) > 1 or bool(_CJK.match(term)))


def _pairs(terms: list[str]) -> list[tuple[str, str]]:
    """Pairs of the top terms, the strongest first: (1,2), (1,3), (2,3), (1,4), ..."""
    top = terms[:6]
    return sorted(itertools.combinations(top, 2), key=lambda p: (top.index(p[1]), top.index(p[0])))


def sample_order(chunks: Sequence[Chunk], seed: int) -> list[int]:
    """The chunks' indexes in the order probes are made: evenly across documents (module docstring)."""
    rng = random.Random(seed)
    by_doc: dict[str, list[int]] = collections.defaultdict(list)
    for i, chunk in enumerate(chunks):
        by_doc[chunk.doc_id].append(i)
    docs = sorted(by_doc)
    rng.shuffle(docs)
    for doc in docs:
        rng.shuffle(by_doc[doc])
    order: list[Any] = []
    for turn in range(max(len(v) for v in by_doc.values())):
        order.extend(by_doc[doc][turn] for doc in docs if turn < len(by_doc[doc]))
    return order


def make_probes(chunks: Sequence[Chunk], keywords: KeywordExtractor, n: int, seed: int = 0,
                terms: Sequence[Sequence[str]] | None = None) -> list[Probe]:
    """Up to ``n`` probes (fewer only when the corpus holds no more distinct ones); ``terms``: the
    chunks' :func:`distinctive` terms, when computed already. A chunk's term pairs are made when it is
    first probed (a large corpus: only the chunks probed)."""
    terms = distinctive(chunks, keywords) if terms is None else terms
    order = [i for i in sample_order(chunks, seed) if len(terms[i]) >= 2]
    pairs: dict[int, list[tuple[str, str]]] = {}
    made: list[Probe] = []
    seen: set[str] = set()
    rounds = max((math.comb(min(len(terms[i]), 6), 2) for i in order), default=0)
    for round_ in range(rounds):
        for i in order:
            if len(made) == n:
                return made
            if i not in pairs:
                pairs[i] = _pairs(list(terms[i]))
            if round_ >= len(pairs[i]):
                continue
            a, b = pairs[i][round_]
            lang = language(chunks[i].text)
            k = (round_ + i) % len(TEMPLATES[lang])
            query = TEMPLATES[lang][k].format(a=a, b=b)
            if query not in seen:
                seen.add(query)
                made.append(Probe(query, chunks[i], (a, b), k, lang))
    return made


def records(probes: Sequence[Probe], sources: dict[str, str], seed: int, keywords: KeywordExtractor,
            chunking: str) -> list[dict[str, Any]]:
    """ragmem's data format: query, the relevant chunk's id and text, the question's type and its provenance."""
    return [{"id": f"probe-{i + 1:05d}", "query": p.query, "relevant_context_ids": [p.chunk.id],
             "reference_contexts": [p.chunk.text], "question_type": "probe",
             "provenance": {"document": p.chunk.doc_id, "source": sources.get(p.chunk.doc_id), "chunk": p.chunk.id,
                            "generator": GENERATOR, "model": None, "terms": list(p.terms), "template": p.template,
                            "language": p.language, "seed": seed, "keywords": keywords.signature(),
                            "chunking": chunking, "ragmem": __version__}}
            for i, p in enumerate(probes)]


def bm25_first(chunks: Sequence[Chunk], probes: Sequence[Probe], keywords: KeywordExtractor,
               advance=lambda n: None) -> int:
    """How many probes the BM25 reference retriever answers with their own chunk first (``advance(1)``
    after each: the progress of a long check)."""
    retriever = BM25Retriever(chunks, keywords)
    index = {c.id: i for i, c in enumerate(chunks)}
    first = 0
    for p in probes:
        top = retriever.search(retriever.prepare(p.query), 1)
        first += bool(top) and top[0][0] == index[p.chunk.id]
        advance(1)
    return first
