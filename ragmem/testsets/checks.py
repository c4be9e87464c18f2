"""The checks a written question passes before it is kept (``ragmem generate``), cheapest first:

- ``language``: the question is in its passage's language (Chinese when more than a fifth of the
  letters are CJK: :func:`ragmem.testsets.probes.language`); no request.
- ``standalone``: the question stands on its own: it names no "passage", "text", "document",
  "author" or "paragraph" it was written from (``the passage``, ``这段``, ``文中``), which a user of
  the agent never saw; no request.
- ``duplicate``: its token set (the metrics' keywords) overlaps a question already kept by at least
  ``generate.duplicate_threshold``, Jaccard ``|A & B| / |A | B|``; no request.
- ``grounded``: the reference answer appears in its contexts: at least ``generate.grounded_share``
  of its keywords are in them (no request), else the judge decides whether it follows from them
  (``claim_support``).
- ``answerable``: the judge, given only the question and its contexts, answers it
  (``answer_from_contexts``) and its answer matches the reference (``answer_correctness``). An
  unanswerable question passes the other way: the judge, given the corpus's best-matching chunks
  (BM25, ``generate.unanswerable_top_k``), finds no answer in them.

This module is the checks' pure part; the requests are :mod:`ragmem.testsets.writing`'s.
"""

from __future__ import annotations

import re
from typing import Sequence

from ragmem.testsets.probes import language
from ragmem.text.keywords import KeywordExtractor

_WORD = re.compile(r"\w")


def same_language(question: str, passage: str) -> bool:
    """Whether ``question`` is in ``passage``'s language.

    >>> same_language("What limits the index?", "The index is limited by memory."), same_language("索引受什么限制？", "The index")
    (True, False)
    """
    return language(question) == language(passage)


_POINTING = re.compile(r"\b(?:the|this|that|these|those|both|two|each|first|second|above|given)\s+"
                       r"(?:passages?|texts?|documents?|authors?|paragraphs?|excerpts?|articles?)\b", re.IGNORECASE)
_POINTING_ZH = re.compile(r"这段|该段|本段|此段|两段|第一段|第二段|这篇|本文|文中|原文|上文|段落|文章中|材料中")


def pointing(question: str) -> str | None:
    """The words by which ``question`` points at the text it was written from (it does not stand on
    its own), or None.

    >>> pointing("What does the passage say about BM25?"), pointing("文中提到的索引多久重建一次？")
    ('the passage', '文中')
    >>> pointing("How long does Quillon take to index documents?") is None
    True
    """
    found = _POINTING.search(question) or _POINTING_ZH.search(question)
    return found.group(0) if found else None


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """``|a & b| / |a | b|``; 0.0 for two empty sets (nothing in common to call a duplicate)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


class Duplicates:
    """The questions kept so far, by token set: :meth:`of` names the first kept question a new one
    near-duplicates (Jaccard at or above the threshold), :meth:`keep` adds one."""

    def __init__(self, keywords: KeywordExtractor, threshold: float):
        self.keywords, self.threshold = keywords, threshold
        self.kept: list[tuple[str, frozenset[str]]] = []

    def tokens(self, question: str) -> frozenset[str]:
        words = frozenset(t.lower() for t in self.keywords.tokens(question) if _WORD.search(t))
        return words or frozenset(question.lower().split())

    def of(self, question: str) -> tuple[str, float] | None:
        """``(the kept question, its similarity)`` for the most similar at or above the threshold, else None."""
        mine = self.tokens(question)
        best = max(((other, jaccard(mine, theirs)) for other, theirs in self.kept), key=lambda p: p[1], default=None)
        return best if best is not None and best[1] >= self.threshold else None

    def keep(self, question: str) -> None:
        self.kept.append((question, self.tokens(question)))


def grounded_share(answer: str, contexts: Sequence[str], keywords: KeywordExtractor) -> float | None:
    """The share of ``answer``'s keywords found in ``contexts`` (1.0 when the answer's text is in one
    of them as it is); ``None`` for an answer with no keyword (the judge decides).

    The keywords of the contexts are compared as a set, so a word the answer inflects otherwise counts
    as missing: the share is a lower bound of what the judge would accept.
    """
    flat = " ".join(answer.split()).lower()
    if flat and any(flat in " ".join(c.split()).lower() for c in contexts):
        return 1.0
    words = {t.lower() for t in keywords.tokens(answer) if _WORD.search(t)}
    if not words:
        return None
    present = {t.lower() for c in contexts for t in keywords.tokens(c)}
    return len(words & present) / len(words)
