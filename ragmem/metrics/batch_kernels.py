"""The n-gram statistics of many (hypothesis, reference) pairs at once, with numpy: chrF's and BLEU's.

:mod:`ragmem.metrics.kernels` computes them pair by pair, in Python; at 10k pairs that was 5 s of
a 20 s run (a ``Counter`` per order per text). Here every pair of a batch is counted together by
sorting, and the integers are the same (``tests/metrics/test_kernels.py`` pins these against the per-pair
kernels and those against sacrebleu).

The one idea, :func:`ngram_matches`: the matches of order ``n`` of a pair are
``Σ_g min(h_g, r_g)`` over the n-grams ``g`` both texts hold. Every position of every text of the
batch gets the id of the n-gram starting there: for ``n = 1`` its pair and its symbol, for ``n > 1``
the dense id of its ``(n-1)``-gram and the symbol ``n - 1`` further on. Ids are exact (no hash:
``np.unique`` renumbers them densely at each order, so they never overflow), and, because the pair
is in the first id, equal ids mean the same n-gram in the same pair. One ``np.unique`` per order
gives the counts of each id on each side, ``min`` of the two the matches.

As in the per-pair kernel, an order only looks at the positions whose shorter n-grams the other text
also holds (an n-gram both hold has each of its sub-grams in both, so no match is lost): on
unrelated texts few positions survive order 2, and the orders above cost little.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

#: bits of a Unicode code point (the symbols of chrF)
CODE_POINT_BITS = 21


def ngram_matches(h_symbols: np.ndarray, h_lengths: np.ndarray, r_symbols: np.ndarray,
                  r_lengths: np.ndarray, max_order: int, bits: int) -> np.ndarray:
    """``matches[p, n - 1] = Σ_g min(h_g, r_g)`` over the n-grams ``g`` of pair ``p``, ``n = 1..max_order``.

    The hypotheses' symbols (non-negative integers below ``2**bits``) are ``h_symbols``, one text
    after another, ``h_lengths[p]`` of them for pair ``p``; the references' likewise.
    """
    pairs = len(h_lengths)
    out = np.zeros((pairs, max_order), dtype=np.int64)
    h_lengths, r_lengths = np.asarray(h_lengths, np.int64), np.asarray(r_lengths, np.int64)
    if pairs == 0 or not h_lengths.any() or not r_lengths.any():
        return out
    symbols = np.concatenate([np.asarray(h_symbols, np.int64), np.asarray(r_symbols, np.int64)])
    pair_of = np.concatenate([np.repeat(np.arange(pairs), h_lengths), np.repeat(np.arange(pairs), r_lengths)])
    lengths = np.concatenate([h_lengths, r_lengths])
    end = np.repeat(np.cumsum(lengths), lengths)  # each position's text ends before this flat index
    n_h = int(h_lengths.sum())
    alive = np.arange(len(symbols))  # positions whose n-gram may occur in the other text
    prefix = pair_of.copy()  # per alive position: the id of its (n-1)-gram (order 1: its pair)
    for n in range(1, max_order + 1):
        fits = alive + n <= end[alive]
        alive, prefix = alive[fits], prefix[fits]
        if not alive.size:
            break
        ids, dense = np.unique((prefix << bits) | symbols[alive + n - 1], return_inverse=True)
        dense = dense.reshape(-1)
        from_h = alive < n_h
        in_h = np.bincount(dense[from_h], minlength=len(ids))
        in_r = np.bincount(dense[~from_h], minlength=len(ids))
        id_pair = np.empty(len(ids), dtype=np.int64)
        id_pair[dense] = pair_of[alive]
        out[:, n - 1] = np.bincount(id_pair, weights=np.minimum(in_h, in_r), minlength=pairs).astype(np.int64)
        # the (n+1)-gram at i can be shared only if the n-grams at i and at i + 1 (same text) are
        shared = np.where(from_h, in_r[dense], in_h[dense]) > 0
        marked = np.zeros(len(symbols) + 1, dtype=bool)
        marked[alive[shared]] = True
        keep = shared & marked[alive + 1] & (alive + 1 < end[alive])
        alive, prefix = alive[keep], dense[keep].astype(np.int64)
    return out


def _lengths(texts: Sequence[Sequence]) -> np.ndarray:
    return np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))


def chrf_statistics_many(hyps: Sequence[str], refs: Sequence[str], order: int = 6) -> np.ndarray:
    """:func:`ragmem.metrics.kernels.chrf_statistics` of each pair: ``[n_hyp, n_ref, n_match]`` per
    character order 1..``order`` (whitespace removed), one row per pair."""
    h = ["".join(text.split()) for text in hyps]
    r = ["".join(text.split()) for text in refs]
    h_len, r_len = _lengths(h), _lengths(r)
    n = np.arange(1, order + 1)
    n_hyp = np.maximum(0, h_len[:, None] - n + 1)
    n_ref = np.maximum(0, r_len[:, None] - n + 1)
    same = np.fromiter((a == b for a, b in zip(h, r)), dtype=bool, count=len(h))
    matches = n_hyp.copy()  # identical texts: every n-gram matches itself
    other = np.flatnonzero(~same)
    if other.size:
        def code_points(texts):
            joined = "".join(texts[i] for i in other)
            return np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)

        matches[other] = ngram_matches(code_points(h), h_len[other], code_points(r), r_len[other],
                                       order, CODE_POINT_BITS)
    stats = np.empty((len(h), order, 3), dtype=np.int64)
    stats[:, :, 0] = np.where(n_ref > 0, n_hyp, 0)  # no hits without a reference n-gram
    stats[:, :, 1] = n_ref
    stats[:, :, 2] = matches
    return stats.reshape(len(h), 3 * order)


def bleu_statistics_many(hyp_tokens: Sequence[Sequence[str]], ref_tokens: Sequence[Sequence[str]],
                         max_order: int = 4) -> np.ndarray:
    """:func:`ragmem.metrics.kernels.bleu_statistics` of each pair of token lists:
    ``[hyp_len, ref_len, correct_1..n, total_1..n]``, one row per pair."""
    vocabulary: dict[str, int] = {}
    number = vocabulary.setdefault

    def symbols(texts):
        return np.fromiter((number(token, len(vocabulary)) for text in texts for token in text), dtype=np.int64)

    h, r = symbols(hyp_tokens), symbols(ref_tokens)
    h_len, r_len = _lengths(hyp_tokens), _lengths(ref_tokens)
    correct = ngram_matches(h, h_len, r, r_len, max_order, max(1, len(vocabulary)).bit_length())
    totals = np.maximum(0, h_len[:, None] - np.arange(max_order))
    return np.concatenate([h_len[:, None], r_len[:, None], correct, totals], axis=1)
