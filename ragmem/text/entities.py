"""Offline entities of a text, for ``context_entity_recall`` without an LLM: part-of-speech tags for
Chinese, capitalised spans and numbers for English.

Kept apart from :mod:`ragmem.metrics.rag` so that the scoring workers (:mod:`ragmem.runtime.parallel`)
import only this, not the metric families (pandas and numpy: about 90 MB in each worker).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Collection, Sequence

from ragmem.text.keywords import DEFAULT_TOKENIZER, keywords_for
from ragmem.text.tokenizers import get_tokenizer

_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*(?:\s+(?:of|the|de|van|von)?\s*[A-Z][\w'’-]*)*")
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)*\b")
_POS_KEEP = ("nr", "ns", "nt", "nz", "m", "t")
_CJK_RUNS = re.compile("[\u3400-\u9fff]+")
#: a character outside ASCII, general punctuation, CJK punctuation (its combining tone marks left out),
#: the CJK ideographs and the full-width ASCII forms. NFKC and casefold change each of those alone (no
#: composition with a neighbour), so in a text without one every entity :class:`OfflineEntities` finds,
#: normalized, occurs in the whole text normalized (its spans, numbers and tagged words are pieces of
#: the text; ``tests/metrics/test_kernels.py`` checks it on 20,000 texts)
_NOT_PLAIN = re.compile("[^\x00-\x7f\u2010-\u2027\u3000-\u3029\u3030-\u303f\u3400-\u9fff\uff01-\uff5e]")


def normalize_entity(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


class OfflineEntities:
    """Part-of-speech tags for Chinese (the keyword tokenizer's tagger: rjieba's ``tag``, or
    jieba.posseg with ``keywords.tokenizer: jieba``); capitalised spans and numbers for English."""

    def __init__(self, stopwords: frozenset[str], tokenizer=None):
        self.stopwords = stopwords
        self.tokenizer = tokenizer if tokenizer is not None else get_tokenizer(DEFAULT_TOKENIZER)

    def signature(self) -> str:
        return f"offline:pos:{self.tokenizer.tagger_signature()}:{','.join(_POS_KEEP)}|en:capitalised+numbers"

    def __call__(self, text: str) -> set[str]:
        """The entities of ``text``, normalized (:func:`normalize_entity`)."""
        found: set[str] = set()
        for span in _CAPITALISED.findall(text):
            words = span.split()
            while words and words[0].lower() in self.stopwords:  # "The Taj Mahal" -> "Taj Mahal"
                words = words[1:]
            if words:
                found.add(" ".join(words))
        found.update(_NUMBER.findall(text))
        runs = _CJK_RUNS.findall(text)
        if runs:  # the runs one space apart: the taggers segment each run alone, whatever separates them
            found.update([word for word, flag in self.tokenizer.pos_tags(" ".join(runs))
                          if flag.startswith(_POS_KEEP) and word.strip()])
        return {normalize_entity(e) for e in found}


def could_hold(text: str, entities: Collection[str]) -> bool:
    """Whether ``text``'s entities (:class:`OfflineEntities`) may include one of ``entities``
    (normalized): false only when the text is plain (:data:`_NOT_PLAIN`) and none of them occurs in it
    normalized, which no entity of the text can then be."""
    if not entities:
        return False
    if _NOT_PLAIN.search(text):
        return True
    folded = normalize_entity(text)
    return any(entity in folded for entity in entities)


def shared_entities(items: Sequence[tuple[str, tuple[str, ...]]], tokenizer: str,
                    stopwords: tuple[str, ...]) -> list[tuple[int, int]]:
    """For each ``(reference, contexts)``: how many distinct entities the reference has, and how many
    of those the contexts have together (``context_entity_recall``'s denominator and numerator; a mapped
    function: see :mod:`ragmem.runtime.parallel`). A context is tagged only when it :func:`could_hold`
    one of the reference's entities not found yet: the others add nothing to the count (on generated
    bilingual data nine contexts in ten; the part-of-speech tagger was most of the metric's time)."""
    K = keywords_for(tokenizer, tuple(stopwords))
    extract = OfflineEntities(K.stopwords, K.tokenizer)
    known: dict[str, set[str]] = {}  # the part's texts, each tagged once (held no longer than the part)

    def entities(text: str) -> set[str]:
        found = known.get(text)
        if found is None:
            found = known[text] = extract(text)
        return found

    counts = []
    for reference, contexts in items:
        wanted, found = entities(reference), set[str]()
        for text in contexts:
            missing = wanted - found
            if not missing:
                break
            if could_hold(text, missing):
                found |= missing & entities(text)
        counts.append((len(wanted), len(found)))
    return counts
