"""The generation scores of one (hypothesis, reference) pair: :class:`GenerationScorer`, and the
mapped function the scoring workers run (:func:`score_pairs`; see :mod:`ragmem.runtime.parallel`).

The definitions of the scores are in :mod:`ragmem.metrics.generation`, which aggregates them. This
module imports neither pandas nor the metric families: a worker loads only what scoring needs
(about 90 MB less in each worker process); numpy (15 MB) once it scores a batch.
"""

from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache
from importlib import metadata
from typing import Sequence

from ragmem.metrics import kernels
from ragmem.runtime.imports import lean_import
from ragmem.text.keywords import normalize
from ragmem.text.tokenizers import get_tokenizer

_ARTICLES = frozenset({"a", "an", "the"})
#: pairs whose n-gram statistics :meth:`GenerationScorer.score_many` counts together
BATCH = 500
#: texts whose tokens a scorer keeps: an example's answer and reference are tokenized once for its
#: scores (bleu_1, ROUGE, token F1, exact match); 16,384 kept 26 MB to the run's end at 10k examples
TOKENS_KEPT = 2048


class GenerationScorer:
    """Every generation score of a (hypothesis, reference) pair. The statistics come from
    :mod:`ragmem.metrics.kernels` (equal to sacrebleu's and rouge-score's, pinned by the tests);
    sacrebleu turns summed statistics into corpus scores."""

    def __init__(self, tokenizer: str = "rjieba", bleu_tokenize: str = "zh"):
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
        # One example's texts are tokenized by bleu_1, ROUGE, token_f1 and exact_match alike:
        # tokenize each text once (thread-safe cache; a reference that recurs nearby is found too).
        self._cached_tokens = lru_cache(maxsize=TOKENS_KEPT)(self._tokenize)

    def __getstate__(self) -> dict:  # to another process (a Dask worker's results): without the cache
        return {k: v for k, v in self.__dict__.items() if k != "_cached_tokens"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._cached_tokens = lru_cache(maxsize=TOKENS_KEPT)(self._tokenize)

    def _tokenize(self, text: str) -> tuple[str, ...]:
        return tuple(self.tokenizer(normalize(text or "")))

    def tokens(self, text: str) -> list[str]:
        return list(self._cached_tokens(text))

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
        return self._unigram_scores(hyp, ref)["bleu_1"]

    def rouge(self, hyp: str, ref: str) -> dict[str, float]:
        """rouge-score's F-measures (its ``score(target=ref, prediction=hyp)``) on our tokens."""
        return {"rouge_1": self._unigram_scores(hyp, ref)["rouge_1"], **self._rouge_2_l(hyp, ref)}

    def token_f1(self, hyp: str, ref: str) -> float:
        return self._unigram_scores(hyp, ref)["token_f1"]

    def exact_match(self, hyp: str, ref: str) -> float:
        return self._unigram_scores(hyp, ref)["exact_match"]

    def _unigram_scores(self, hyp: str, ref: str) -> dict[str, float]:
        """bleu_1, ROUGE-1, token F1 and exact match, from one count of each text's tokens.

        The unigram matches ``m = Σ_t min(h_t, r_t)`` serve three scores: bleu_1 is ``BP * m / |h|``;
        ROUGE-1 is the F-measure of ``m / |h|`` and ``m / |r|``; token F1 is the same on the SQuAD
        tokens (without the articles a/an/the), whose matches are ``m`` less the articles' own."""
        h, r = self._cached_tokens(hyp), self._cached_tokens(ref)
        hc, rc = Counter(h), Counter(r)
        matches = kernels.clipped_overlap(hc, rc)
        articles_h, articles_r = (sum(c[a] for a in _ARTICLES if a in c) for c in (hc, rc))
        common = matches - sum(min(hc[a], rc[a]) for a in _ARTICLES if a in hc and a in rc)
        n_h, n_r = len(h) - articles_h, len(r) - articles_r  # SQuAD token counts
        if not n_h or not n_r:
            f1 = float(n_h == n_r)
        else:
            f1 = 0.0 if common == 0 else kernels.fmeasure(common / n_h, common / n_r)
        if h == r:
            exact = 1.0
        elif not (articles_h or articles_r) or n_h != n_r:
            exact = 0.0
        else:
            exact = float([t for t in h if t not in _ARTICLES] == [t for t in r if t not in _ARTICLES])
        return {"bleu_1": _bleu_1(len(h), len(r), matches),
                "rouge_1": kernels.fmeasure(matches / max(len(h), 1), matches / max(len(r), 1)),
                "token_f1": f1, "exact_match": exact}

    def _rouge_2_l(self, hyp: str, ref: str) -> dict[str, float]:
        h, r = self._cached_tokens(hyp), self._cached_tokens(ref)
        return {"rouge_2": kernels.rouge_n(kernels.ngram_counts(r, 2), kernels.ngram_counts(h, 2)),
                "rouge_l": kernels.rouge_l(r, h)}

    def score(self, hyp: str, ref: str) -> dict[str, object]:
        """Every per-example score, plus the BLEU/chrF statistics corpus scores are built from."""
        return self._scores(hyp, ref, self.bleu_stats(hyp, ref), self.chrf_stats(hyp, ref))

    def score_many(self, pairs: Sequence[tuple[str, str]]) -> list[dict[str, object]]:
        """:meth:`score` of each pair, the BLEU and chrF statistics of :data:`BATCH` pairs at a time
        counted at once (:mod:`ragmem.metrics.batch_kernels`: the same integers, a quarter of the
        time; a batch's arrays take about 10 kB a pair, so batches, not the whole map)."""
        if len(pairs) > BATCH:
            return [s for i in range(0, len(pairs), BATCH) for s in self.score_many(pairs[i:i + BATCH])]
        if len(pairs) < 2:
            return [self.score(hyp, ref) for hyp, ref in pairs]
        from ragmem.metrics import batch_kernels as batch  # numpy: only once a batch is scored
        hyps, refs = [hyp for hyp, _ in pairs], [ref for _, ref in pairs]
        segmented = {text: self._bleu_segment(text).split() for text in {*hyps, *refs}}
        bleu = batch.bleu_statistics_many([segmented[t] for t in hyps], [segmented[t] for t in refs],
                                          self._bleu.max_ngram_order).tolist()
        chrf = batch.chrf_statistics_many(hyps, refs, self._chrf.char_order).tolist()
        return [self._scores(hyp, ref, b, c) for (hyp, ref), b, c in zip(pairs, bleu, chrf)]

    def _scores(self, hyp: str, ref: str, bleu_stats: list[int], chrf_stats: list[int]) -> dict[str, object]:
        return {"bleu": self._sentence_bleu_from_stats(bleu_stats), "chrf": self.chrf_from_stats(chrf_stats),
                **self._unigram_scores(hyp, ref), **self._rouge_2_l(hyp, ref),
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


def _bleu_1(n_h: int, n_r: int, matches: int) -> float:
    """LoCoMo's unigram BLEU: ``BP * matches / n_h`` (0 without a hypothesis token or a match)."""
    if not n_h or matches == 0:
        return 0.0
    bp = 1.0 if n_h > n_r else math.exp(1 - n_r / n_h)
    return bp * matches / n_h


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
    :mod:`ragmem.runtime.parallel`)."""
    return scorer_for(tokenizer, bleu_tokenize).score_many(pairs)


score_pairs.part_items = 250  # type: ignore[attr-defined]  # a forked child's part (ragmem.runtime.parallel.ForkPool.PART)
