"""The generation scores of one (hypothesis, reference) pair: :class:`GenerationScorer`, and the
mapped function the scoring workers run (:func:`score_pairs`; see :mod:`ragmem.parallel`).

The definitions of the scores are in :mod:`ragmem.metrics.generation`, which aggregates them. This
module imports neither pandas nor numpy nor the metric families: a worker loads only what scoring
needs (about 90 MB less in each worker process).
"""

from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache
from importlib import metadata
from typing import Sequence

from ragmem.imports import lean_import
from ragmem.metrics import kernels
from ragmem.text.keywords import normalize
from ragmem.text.tokenizers import get_tokenizer

_ARTICLES = frozenset({"a", "an", "the"})


class GenerationScorer:
    """Every generation score of a (hypothesis, reference) pair. The statistics come from
    :mod:`ragmem.metrics.kernels` (equal to sacrebleu's and rouge-score's, pinned by the tests);
    sacrebleu turns summed statistics into corpus scores."""

    def __init__(self, tokenizer: str = "jieba", bleu_tokenize: str = "zh"):
        metrics = lean_import("sacrebleu.metrics")
        BLEU, CHRF = metrics.BLEU, metrics.CHRF

        self.tokenizer = get_tokenizer(tokenizer)
        self.bleu_tokenize = bleu_tokenize
        self._bleu = BLEU(tokenize=bleu_tokenize)
        self._sentence_bleu = BLEU(tokenize=bleu_tokenize, effective_order=True)
        self._chrf = CHRF()
        # sacrebleu's signatures name the number of references, known once a score was computed
        self._bleu.corpus_score(["a"], [["a"]])
        self._chrf.corpus_score(["a"], [["a"]])
        # sacrebleu's zh tokenizer as one regex (kernels.zh_tokenize); the others are sacrebleu's own
        self._bleu_segment = kernels.zh_tokenize if bleu_tokenize == "zh" else self._bleu._preprocess_segment
        # One example's texts are tokenized by bleu_1, ROUGE, token_f1 and exact_match alike, and
        # references recur across examples and runs: tokenize each text once (thread-safe cache).
        self._cached_tokens = lru_cache(maxsize=16384)(self._tokenize)

    def _tokenize(self, text: str) -> tuple[str, ...]:
        return tuple(self.tokenizer(normalize(text or "")))

    def tokens(self, text: str) -> list[str]:
        return list(self._cached_tokens(text))

    def squad_tokens(self, text: str) -> list[str]:
        return [t for t in self._cached_tokens(text) if t not in _ARTICLES]

    # ---- per example -------------------------------------------------------------------------
    def bleu_stats(self, hyp: str, ref: str) -> list[int]:
        """sacrebleu's sufficient statistics: [hyp_len, ref_len, correct 1-4, total 1-4]."""
        order = self._bleu.max_ngram_order
        hyp_ngrams = kernels.bleu_ngrams(self._bleu_segment(hyp), order)
        ref_ngrams = hyp_ngrams if ref == hyp else kernels.bleu_ngrams(self._bleu_segment(ref), order)
        return kernels.bleu_statistics(hyp_ngrams, ref_ngrams, order)

    def chrf_stats(self, hyp: str, ref: str) -> list[int]:
        return kernels.chrf_statistics(hyp, ref, self._chrf.char_order)

    def bleu_from_stats(self, stats: Sequence[float]) -> float:
        """Corpus BLEU (0-1) from summed statistics."""
        # through the instance, so its smoothing applies as in corpus_score (the static
        # compute_bleu defaults to no smoothing: one n-gram order without a match gave 0)
        return self._bleu._compute_score_from_stats([int(round(s)) for s in stats]).score / 100.0

    def chrf_from_stats(self, stats: Sequence[float]) -> float:
        return self._chrf._compute_score_from_stats([int(round(s)) for s in stats]).score / 100.0

    def sentence_bleu(self, hyp: str, ref: str) -> float:
        """sacrebleu's ``sentence_score`` (effective order), from the same statistics as ``bleu_stats``."""
        return self._sentence_bleu_from_stats(self.bleu_stats(hyp, ref))

    def sentence_chrf(self, hyp: str, ref: str) -> float:
        return self.chrf_from_stats(self.chrf_stats(hyp, ref))

    def _sentence_bleu_from_stats(self, stats: Sequence[int]) -> float:
        return self._sentence_bleu._compute_score_from_stats(list(stats)).score / 100.0

    def bleu_1(self, hyp: str, ref: str) -> float:
        h, r = self._cached_tokens(hyp), self._cached_tokens(ref)
        if not h:
            return 0.0
        ref_counts = Counter(r)
        matches = sum(min(c, ref_counts[t]) for t, c in Counter(h).items())
        if matches == 0:
            return 0.0
        bp = 1.0 if len(h) > len(r) else math.exp(1 - len(r) / len(h))
        return bp * matches / len(h)

    def rouge(self, hyp: str, ref: str) -> dict[str, float]:
        """rouge-score's F-measures (its ``score(target=ref, prediction=hyp)``) on our tokens."""
        h, r = self._cached_tokens(hyp), self._cached_tokens(ref)
        return {"rouge_1": kernels.rouge_n(kernels.ngram_counts(r, 1), kernels.ngram_counts(h, 1)),
                "rouge_2": kernels.rouge_n(kernels.ngram_counts(r, 2), kernels.ngram_counts(h, 2)),
                "rouge_l": kernels.rouge_l(r, h)}

    def token_f1(self, hyp: str, ref: str) -> float:
        h, r = self.squad_tokens(hyp), self.squad_tokens(ref)
        if not h or not r:
            return float(h == r)
        common = sum((Counter(h) & Counter(r)).values())
        if common == 0:
            return 0.0
        precision, recall = common / len(h), common / len(r)
        return 2 * precision * recall / (precision + recall)

    def exact_match(self, hyp: str, ref: str) -> float:
        return float(self.squad_tokens(hyp) == self.squad_tokens(ref))

    def score(self, hyp: str, ref: str) -> dict[str, object]:
        """Every per-example score, plus the BLEU/chrF statistics corpus scores are built from."""
        bleu_stats, chrf_stats = self.bleu_stats(hyp, ref), self.chrf_stats(hyp, ref)
        return {"bleu": self._sentence_bleu_from_stats(bleu_stats), "bleu_1": self.bleu_1(hyp, ref),
                "chrf": self.chrf_from_stats(chrf_stats), **self.rouge(hyp, ref),
                "token_f1": self.token_f1(hyp, ref), "exact_match": self.exact_match(hyp, ref),
                "bleu_stats": bleu_stats, "chrf_stats": chrf_stats}

    def signature(self) -> str:
        def version(name):
            try:
                return metadata.version(name)
            except metadata.PackageNotFoundError:
                return "unknown"

        return (f"bleu:{self._bleu.get_signature()}|chrf:{self._chrf.get_signature()}"
                f"|rouge:rouge-score-{version('rouge-score')},tok:{self.tokenizer.signature()}"
                f"|f1,em:squad,tok:{self.tokenizer.signature()}|scale:0-1")


@lru_cache(maxsize=8)
def scorer_for(tokenizer: str, bleu_tokenize: str) -> GenerationScorer:
    """The one shared scorer per setting: metrics, the run's signature, the bootstrap and the memory
    bench use the same instance (it holds no per-call state).

    >>> scorer = scorer_for("jieba", "zh")
    >>> scorer.token_f1("The vector database", "a vector database"), scorer.exact_match("向量数据库", "向量 数据库")
    (1.0, 1.0)
    >>> round(scorer.sentence_bleu("检索增强生成", "检索增强生成"), 4)
    1.0
    """
    return GenerationScorer(tokenizer, bleu_tokenize)


def score_pairs(pairs: Sequence[tuple[str, str]], tokenizer: str, bleu_tokenize: str) -> list[dict[str, object]]:
    """:meth:`GenerationScorer.score` of each (hypothesis, reference) pair (a mapped function: see
    :mod:`ragmem.parallel`)."""
    scorer = scorer_for(tokenizer, bleu_tokenize)
    return [scorer.score(hyp, ref) for hyp, ref in pairs]
