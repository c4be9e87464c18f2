"""Which chunks each LLM-written question is written from (``ragmem generate`` without ``--offline``).

- **Quotas**: ``n`` questions split by ``generate.mix`` with the largest-remainder rule (the shares of
  a mix of 0.5/0.2/0.15/0.15 over 30 questions give 15/6/5/4, summing to 30).
- **One chunk** (``single_hop``, ``unanswerable``): chunks sampled evenly across documents with the
  seed (:func:`ragmem.testsets.probes.sample_order`), each type in an order of its own.
- **Two chunks** (``multi_hop``, ``comparison``): a chunk in that order and its partner, the chunk that
  shares the most of its distinctive terms (the ten strongest by ``tf * idf``,
  :func:`ragmem.testsets.probes.distinctive`), from another document where one shares any; else a
  chunk of the same document that is not its neighbour (neighbours overlap as text). The shared terms
  are the link the multi-hop prompt names. A chunk sharing no term with any other has no partner; a
  pair is used once per type.

Each type's candidates are one seeded stream; a round takes the next ones from it, so a rerun with
the same seed and corpus asks the very same requests (and the judge cache answers them).
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass
from typing import AbstractSet, Iterator, Mapping, Sequence

from ragmem.config.generate_settings import QUESTION_TYPES
from ragmem.reference.corpus import Chunk
from ragmem.testsets.probes import sample_order, TOP



@dataclass(frozen=True)
class Candidate:
    """What one question is written from: its type, its chunk(s), and the terms linking two chunks."""

    type: str
    chunks: tuple[Chunk, ...]
    link: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.type}:{'+'.join(c.id for c in self.chunks)}"


def quotas(n: int, mix: Mapping[str, float]) -> dict[str, int]:
    """``n`` split by the shares of ``mix`` (largest remainder; ties in QUESTION_TYPES order).

    >>> quotas(30, {"single_hop": 0.5, "multi_hop": 0.2, "comparison": 0.15, "unanswerable": 0.15})
    {'single_hop': 15, 'multi_hop': 6, 'comparison': 5, 'unanswerable': 4}
    """
    types = [t for t in QUESTION_TYPES if mix.get(t, 0) > 0]
    exact = {t: n * mix[t] for t in types}
    out = {t: math.floor(exact[t]) for t in types}
    rest = n - sum(out.values())
    for t in sorted(types, key=lambda t: (-(exact[t] - out[t]), QUESTION_TYPES.index(t)))[:rest]:
        out[t] += 1
    return out


def streams(chunks: Sequence[Chunk], terms: Sequence[Sequence[str]], types: Sequence[str],
            seed: int) -> dict[str, Iterator[Candidate]]:
    """One stream of candidates per type (module docstring); ``terms[i]`` is chunk i's terms, the
    most distinctive first."""
    holders: dict[str, list[int]] = collections.defaultdict(list)
    for i, words in enumerate(terms):
        for word in words:
            holders[word].append(i)
    out = {}
    for number, kind in enumerate(QUESTION_TYPES):
        if kind in types:
            order = sample_order(chunks, seed * len(QUESTION_TYPES) + number)
            out[kind] = (_singles(kind, chunks, order) if kind in ("single_hop", "unanswerable")
                         else _pairs(kind, chunks, order, terms, holders))
    return out


def _singles(kind: str, chunks: Sequence[Chunk], order: list[int]) -> Iterator[Candidate]:
    for i in order:
        yield Candidate(kind, (chunks[i],))


def _pairs(kind: str, chunks: Sequence[Chunk], order: list[int], top: Sequence[Sequence[str]],
           holders: Mapping[str, list[int]]) -> Iterator[Candidate]:
    used: set[tuple[int, int]] = set()
    for i in order:
        j, shared = partner(i, chunks, top, holders, used)
        if j is not None:
            used.add((min(i, j), max(i, j)))
            yield Candidate(kind, (chunks[i], chunks[j]), tuple(shared))


def partner(i: int, chunks: Sequence[Chunk], top: Sequence[Sequence[str]], holders: Mapping[str, list[int]],
            used: AbstractSet[tuple[int, int]] = frozenset()) -> tuple[int | None, list[str]]:
    """Chunk i's partner and the terms they share (module docstring); ``(None, [])`` when none.
    Shared terms are weighted by their rank in chunk i's list (the strongest counts most)."""
    score: collections.Counter[int] = collections.Counter()
    for rank, word in enumerate(top[i]):
        for j in holders.get(word, ()):
            if j != i:
                score[j] += TOP - rank
    def allowed(j: int, other_document: bool) -> bool:
        if (min(i, j), max(i, j)) in used:
            return False
        if other_document:
            return chunks[j].doc_id != chunks[i].doc_id
        return chunks[j].doc_id == chunks[i].doc_id and abs(j - i) > 1
    for other_document in (True, False):
        found = [j for j in score if allowed(j, other_document)]
        if found:
            best = min(found, key=lambda j: (-score[j], j))
            return best, [w for w in top[i] if w in top[best]]
    return None, []
