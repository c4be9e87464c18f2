"""Offline entities of a text, for ``context_entity_recall`` without an LLM: part-of-speech tags for
Chinese, capitalised spans and numbers for English.

Kept apart from :mod:`ragmem.metrics.rag` so that the scoring workers (:mod:`ragmem.runtime.parallel`)
import only this, not the metric families (pandas and numpy: about 90 MB in each worker).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Sequence

from ragmem.text.keywords import DEFAULT_TOKENIZER, keywords_for
from ragmem.text.tokenizers import get_tokenizer

_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*(?:\s+(?:of|the|de|van|von)?\s*[A-Z][\w'’-]*)*")
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)*\b")
_POS_KEEP = ("nr", "ns", "nt", "nz", "m", "t")
_CJK_RUNS = re.compile("[\u3400-\u9fff]+")


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

    def __call__(self, text: str, shared: dict[str, str] | None = None) -> set[str]:
        """The entities of ``text``; each one the string ``shared`` holds for it, when given (the
        texts of one map share their strings, and their pickle from a worker holds each once)."""
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
        if shared is None:
            return {normalize_entity(e) for e in found}
        return {shared.setdefault(entity, entity) for entity in map(normalize_entity, found)}


def offline_entities(texts: Sequence[str], tokenizer: str, stopwords: tuple[str, ...]) -> list[tuple[str, ...]]:
    """:class:`OfflineEntities` of each text, each a tuple of distinct entities (a mapped function:
    see :mod:`ragmem.runtime.parallel`). Tuples, not sets: a run holds every text's entities at
    once, and a set of three strings takes 216 bytes against a tuple's 64."""
    K = keywords_for(tokenizer, tuple(stopwords))
    extract = OfflineEntities(K.stopwords, K.tokenizer)
    shared: dict[str, str] = {}
    return [tuple(extract(text, shared)) for text in texts]
