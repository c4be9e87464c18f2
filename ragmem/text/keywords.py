"""Keyword sets: what the overlap judge and the coverage metrics compare.

``K(text)`` = the set of tokens of ``lowercase(NFKC(text))`` (see :mod:`ragmem.text.tokenizers`)
minus stopwords. NFKC folds full-width letters and digits (``ＲＡＧ２`` -> ``rag2``) and
compatibility forms, so the same word typed two ways is one keyword.

Stopwords come from maintained lists, chosen per language with ``keywords.stopwords``:

- ``stopwords-iso:zh`` — the stopwords-iso Chinese list (package ``stopwordsiso``, 794 words);
- ``stopwords:en``     — the Snowball-style English list of the ``stopwords`` package (175 words).
  stopwords-iso's English list (1,298 words) is not the default: it removes content words such as
  "system", "information" and "results", which RAG answers are made of.

Evaluation data repeats the same contexts across many examples, so keyword sets are cached per
distinct text (the biggest saving measured for jieba; see STACK-NOTES).
"""

from __future__ import annotations

import collections
import math
import unicodedata
from collections import Counter
from functools import lru_cache
from importlib import metadata
from typing import Sequence

from ragmem.errors import ConfigError
from ragmem.runtime.parallel import SERIAL
from ragmem.text.tokenizers import get_tokenizer

DEFAULT_STOPWORDS = ("stopwords-iso:zh", "stopwords:en")
DEFAULT_TOKENIZER = "rjieba"
#: what a kept keyword set's words are joined with (:func:`pack`): no token holds whitespace (the
#: word regex and the CJK runs of :mod:`ragmem.text.tokenizers`)
_SEP = " "


def pack(words) -> str | tuple[str, ...]:
    """A keyword set as :class:`KeywordExtractor` keeps it: its words joined by a space, one string
    (issue 57: on 10k examples of fresh words, letting go of the kept sets freed 114 MB of the heap
    as tuples of word strings, 19 MB packed). A set with a word that holds a space stays a tuple: no
    tokenizer of :mod:`ragmem.text.tokenizers` makes one, but a pack is exact whatever it is given.
    :func:`unpack` gives the words back."""
    words = tuple(words)
    joined = _SEP.join(words)
    return joined if not words or joined.count(_SEP) == len(words) - 1 else words


def unpack(kept: str | tuple[str, ...]) -> Sequence[str]:
    """The words of a keyword set :func:`pack` made."""
    if isinstance(kept, tuple):
        return kept
    return kept.split(_SEP) if kept else ()


def _package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"


def _load_list(spec: str) -> tuple[frozenset[str], str]:
    """``source:lang`` -> (words, signature part)."""
    source, _, lang = spec.partition(":")
    if source == "stopwords-iso":
        import stopwordsiso

        if not lang or not stopwordsiso.has_lang(lang):
            raise ConfigError(f"keywords.stopwords: stopwords-iso has no language {lang!r}")
        words = stopwordsiso.stopwords(lang)
        return frozenset(words), f"stopwords-iso-{_package_version('stopwordsiso')}:{lang}"
    if source == "stopwords":
        import stopwords as stopwords_pkg

        languages = {"en": "english", "zh": "chinese"}
        name = languages.get(lang, lang)
        try:
            words = stopwords_pkg.get_stopwords(name)
        except Exception:
            raise ConfigError(f"keywords.stopwords: the stopwords package has no language {lang!r}") from None
        return frozenset(words), f"stopwords-{_package_version('stopwords')}:{lang}"
    raise ConfigError(f"keywords.stopwords: unknown list {spec!r}; use 'stopwords-iso:LANG' or "
                      f"'stopwords:LANG' (e.g. {', '.join(DEFAULT_STOPWORDS)}), or [] for none")


def normalize(text: str) -> str:
    """Unicode NFKC, then lowercase (``casefold`` would also fold ß -> ss; lowercase is enough)."""
    return unicodedata.normalize("NFKC", text).lower()


class KeywordExtractor:
    """``K(text)``: normalised, segmented, stopword-free keyword set of a text.

    >>> K = KeywordExtractor()
    >>> sorted(K("RAG系统依赖向量检索"))
    ['rag', '依赖', '向量', '检索', '系统']
    """

    def __init__(self, tokenizer: str = DEFAULT_TOKENIZER,
                 stopwords: tuple[str, ...] | list[str] = DEFAULT_STOPWORDS, cache_size: int = 1 << 18):
        self.tokenizer_name = tokenizer
        self.tokenizer = get_tokenizer(tokenizer)
        self.stopword_specs = tuple(stopwords)
        words: set[str] = set()
        parts = []
        for spec in self.stopword_specs:
            listed, signature = _load_list(spec)
            # stopwords-iso's Chinese list holds the digits 0-9; numbers are content (a year, a
            # count, a version), so numeric entries are never treated as stopwords.
            words |= {normalize(w) for w in listed if not normalize(w).isdigit()}
            parts.append(signature)
        self.stopwords = frozenset(words)
        self._stopword_signature = "+".join(parts) or "none"
        # the keyword sets of the texts seen last, least recently used dropped first beyond
        # cache_size (keywords.cache_size: a run of a million examples has millions of distinct
        # texts), each packed into one string (:func:`pack`: at 30k examples, 150k texts held 280 MB
        # as sets), made a set again when asked for
        self.cache_size = cache_size
        self._known: collections.OrderedDict[str, str | tuple[str, ...]] = collections.OrderedDict()
        self.hits = self.misses = 0
        # what settle() keeps across the chunks of a streamed run: how often each text primed since
        # the last settle occurred, and the hashes of the texts forgotten after occurring once
        self._uses: collections.Counter[str] = collections.Counter()
        self._once: set[int] = set()

    def prime(self, texts, mapper=None, counted: bool = True) -> None:
        """Compute the keyword sets of ``texts`` at once (on ``mapper``'s workers: see
        :mod:`ragmem.runtime.parallel`), so the metrics that ask for them later find them. Each
        occurrence of a text is counted for :meth:`settle` (unless not ``counted``: the same texts
        primed again later, as a batch's references and answers before the judge reads them)."""
        texts = list(texts)
        if counted:
            self._uses.update(texts)
        distinct = list(dict.fromkeys(texts))
        todo = [t for t in distinct if t not in self._known]
        self.hits += len(distinct) - len(todo)
        self.misses += len(todo)
        for text in distinct[-self.cache_size:]:  # the ones found are the most recent again
            if text in self._known:
                self._known.move_to_end(text)
        sets = (mapper or SERIAL).map(keyword_sets, todo, self.tokenizer_name, self.stopword_specs)
        for text, found in zip(todo[-self.cache_size:], sets[-self.cache_size:]):
            self._keep(text, found)

    def settle(self) -> None:
        """After a chunk of a streamed run: forget the keyword sets of the texts that occurred once
        (in the texts primed, or asked for and not found, since the last settle) and had not occurred in an earlier chunk; keep
        those that repeat. On data whose texts do not repeat the cache then holds one chunk's texts,
        not ``cache_size`` of them (at 30k examples 210,000 texts: ~300 MB); a text that recurs in
        a later chunk is segmented again there once, and kept from then on."""
        for text, uses in self._uses.items():
            key = hash(text)
            if uses > 1 or key in self._once:
                self._once.discard(key)
            elif text in self._known:
                del self._known[text]
                self._once.add(key)
        self._uses.clear()
        if len(self._once) > self.cache_size:  # (the texts seen once, remembered for a cache's worth of texts)
            self._once.clear()

    def forget(self) -> None:
        """Let go of every keyword set kept (a run's scoring is over; the counts of hits and misses stay)."""
        self._known.clear()
        self._uses.clear()
        self._once.clear()

    def _keep(self, text: str, found: str | tuple[str, ...]) -> None:
        self._known[text] = found
        if len(self._known) > self.cache_size:
            self._known.popitem(last=False)

    def hit_rate(self) -> float | None:
        """The share of keyword-set lookups answered from the cache (None before any)."""
        asked = self.hits + self.misses
        return self.hits / asked if asked else None

    def tokens(self, text: str) -> list[str]:
        """All tokens of the normalised text, stopwords removed, in order (duplicates kept)."""
        return [t for t in self.tokenizer(normalize(text)) if t not in self.stopwords]

    def keywords(self, text: str) -> frozenset[str]:
        """``K(text)``: from :meth:`prime`'s results, else segmented now (and cached)."""
        return frozenset(self._stored(text))

    def _stored(self, text: str) -> Sequence[str]:
        known = self._known.get(text)
        if known is not None:
            self.hits += 1
            self._known.move_to_end(text)
            return unpack(known)
        self.misses += 1
        found = tuple(self._keywords(text))
        self._keep(text, pack(found))
        if len(self._uses) < self.cache_size:  # an occurrence for settle() (a query no prime saw had
            self._uses[text] += 1              # stayed to the cache's end: the cache grew chunk by chunk)
        return found

    def _keywords(self, text: str) -> frozenset[str]:
        return frozenset(self.tokens(text))

    def __call__(self, text: str) -> frozenset[str]:
        return self.keywords(text)

    def union(self, texts) -> frozenset[str]:
        """Keywords of several texts together (e.g. all contexts of an example)."""
        out: set[str] = set()
        for text in texts:  # from the kept words directly (no set made per text)
            out.update(self._stored(text))
        return frozenset(out)

    def signature(self) -> str:
        return f"tok:{self.tokenizer.signature()}|sw:{self._stopword_signature}|norm:nfkc-lower"

    def stopword_signature(self) -> str:
        return self._stopword_signature


@lru_cache(maxsize=8)
def keywords_for(tokenizer: str, stopwords: tuple[str, ...]) -> KeywordExtractor:
    """One extractor per setting and process (a worker's: its dictionary loads once)."""
    return KeywordExtractor(tokenizer, stopwords)


def keyword_sets(texts, tokenizer: str, stopwords: tuple[str, ...]) -> list[str | tuple[str, ...]]:
    """``K(text)`` of each text, packed (:func:`pack`; a mapped function: see :mod:`ragmem.runtime.parallel`)."""
    K = keywords_for(tokenizer, tuple(stopwords))
    return [pack(K._keywords(text)) for text in texts]  # each text comes once: a worker caches nothing


def keyword_cosines(pairs, tokenizer: str, stopwords: tuple[str, ...]) -> list[float]:
    """Cosine of the keyword-count vectors (:meth:`KeywordExtractor.tokens`, repeats counted) of
    each ``(a, b)`` pair: ``Σ_t a_t b_t / (‖a‖ ‖b‖)``, 0 when either has none (offline
    ``answer_relevancy``; a mapped function: see :mod:`ragmem.runtime.parallel`)."""
    K = keywords_for(tokenizer, tuple(stopwords))
    out = []
    for a, b in pairs:
        ca, cb = Counter(K.tokens(a)), Counter(K.tokens(b))
        dot = sum(ca[t] * cb[t] for t in ca)
        norm = math.sqrt(sum(v * v for v in ca.values())) * math.sqrt(sum(v * v for v in cb.values()))
        out.append(dot / norm if norm else 0.0)
    return out
