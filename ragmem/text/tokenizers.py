"""Tokenizers that split normalised text into words, Chinese included.

Each tokenizer is a small class with a ``name``, a ``__call__(text) -> list[str]`` and a
``signature()`` naming its settings and library version, so scores made with different tokenizers
are never compared by mistake (the sacrebleu practice).

Text is split into runs first: runs of CJK ideographs go to the segmenter, everything else is split
into words and numbers with a Unicode-aware regex (ASCII words, ``3.5`` and ``2024`` stay whole).
The original module's ``\\b\\w+\\b`` treated a whole Chinese sentence as one word; this does not.
"""

from __future__ import annotations

import logging
import re
import threading
from importlib import metadata

from ragmem.errors import ConfigError

# CJK Unified Ideographs (+ extension A, compatibility ideographs, extensions B-F).
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
_RUNS = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<other>[^{_CJK}]+)")
# A number with its decimal/thousands separators, or a run of letters/digits (no underscore).
_WORDS = re.compile(r"\d+(?:[.,]\d+)+(?![^\W_])|[^\W_]+")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


class _RunTokenizer:
    """Splits non-CJK runs with the word regex; subclasses segment the CJK runs."""

    name = "base"

    def segment_cjk(self, run: str) -> list[str]:
        raise NotImplementedError

    def __call__(self, text: str) -> list[str]:
        tokens: list[str] = []
        for match in _RUNS.finditer(text):
            if match.lastgroup == "cjk":  # no ideograph is whitespace: only empty segments to drop
                tokens.extend(filter(None, self.segment_cjk(match.group())))
            else:
                tokens.extend(_WORDS.findall(match.group()))
        return tokens

    def signature(self) -> str:
        return self.name

    def pos_tags(self, text: str) -> list[tuple[str, str]]:
        """(word, part-of-speech flag) over a text of CJK runs (ictclas flags, as jieba.posseg)."""
        return JiebaTokenizer().pos_tags(text)

    def tagger_signature(self) -> str:
        return f"jieba-{_version('jieba')}-posseg"


class JiebaTokenizer(_RunTokenizer):
    """jieba's default (accurate) mode for Chinese runs; its dictionary loads once, silently."""

    name = "jieba"
    _lock = threading.Lock()
    _loaded = False

    def __init__(self) -> None:
        import jieba

        self._jieba = jieba

    def _ensure_loaded(self) -> None:
        if JiebaTokenizer._loaded:
            return
        with JiebaTokenizer._lock:
            if not JiebaTokenizer._loaded:
                # jieba logs "Building prefix dict ..." to stderr on first use; keep the user's terminal clean.
                self._jieba.setLogLevel(logging.WARNING)
                logging.getLogger("jieba").setLevel(logging.WARNING)
                self._jieba.initialize()
                JiebaTokenizer._loaded = True

    def segment_cjk(self, run: str) -> list[str]:
        self._ensure_loaded()
        return self._jieba.lcut(run)

    def signature(self) -> str:
        return f"jieba-{_version('jieba')}"

    def pos_tags(self, text: str) -> list[tuple[str, str]]:
        import jieba.posseg as posseg

        self._ensure_loaded()
        return [(pair.word, pair.flag) for pair in posseg.lcut(text)]


class RjiebaTokenizer(_RunTokenizer):
    """jieba's dictionary and HMM in Rust (``rjieba``, jieba-rs): 20-40x faster than jieba, and
    the default (``keywords.tokenizer``, ``generation.tokenizer``).

    jieba stays the reference. The CJK runs ragmem hands it segment as jieba's do on the parity
    corpora measured in ``benchmarks/bench_segmenters.py`` (every token of 9,297 texts; its part of
    speech tags, which ``context_entity_recall`` reads, differ on some: benchmarks/README.md); the
    signature names it, so scores made with either are never compared as one.
    """

    name = "rjieba"

    def __init__(self) -> None:
        try:
            import rjieba
        except ImportError:
            raise ConfigError("tokenizer rjieba: the package is not installed (a dependency of ragmem: "
                              "pip install rjieba), or choose keywords.tokenizer: jieba") from None
        self._rjieba = rjieba
        # its dictionary (33 MB, loaded on first use) now: the processes a map forks from this one
        # share it instead of each loading its own (ragmem.runtime.parallel.ForkPool)
        rjieba.cut("词典")

    def segment_cjk(self, run: str) -> list[str]:
        return self._rjieba.cut(run)

    def signature(self) -> str:
        return f"rjieba-{_version('rjieba')}"

    def pos_tags(self, text: str) -> list[tuple[str, str]]:
        return self._rjieba.tag(text)

    def tagger_signature(self) -> str:
        return f"rjieba-{_version('rjieba')}-tag"


class CharTokenizer(_RunTokenizer):
    """Every CJK ideograph is a token (no dictionary); a baseline, and what sacrebleu's ``zh`` does."""

    name = "char"

    def segment_cjk(self, run: str) -> list[str]:
        return list(run)


TOKENIZERS: dict[str, type[_RunTokenizer]] = {"jieba": JiebaTokenizer, "rjieba": RjiebaTokenizer,
                                               "char": CharTokenizer}


def get_tokenizer(name: str) -> _RunTokenizer:
    try:
        return TOKENIZERS[name]()
    except KeyError:
        raise ConfigError(f"keywords.tokenizer: unknown tokenizer {name!r}; "
                          f"choose one of {', '.join(TOKENIZERS)}") from None
