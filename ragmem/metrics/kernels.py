"""Fast kernels for the generation metrics' per-example statistics, equal to the libraries' own.

sacrebleu and rouge-score are the reference implementations; their per-call overhead dominated a
10k-example run (sacrebleu re-tokenizes and rebuilds reference n-grams per call, its ``zh``
tokenizer tests every character against 27 ranges in Python, rouge-score fills an
``|a| x |b|`` table in Python and imports nltk). These kernels compute the same integers and the
same floats (``tests/metrics/test_kernels.py`` pins them against the libraries on bilingual corpora, to 0 for
the integer statistics and 1e-12 for the F-measures):

- :func:`zh_tokenize`: sacrebleu's ``TokenizerZh`` as one regex substitution, its character class
  built from sacrebleu's own ``_UCODE_RANGES`` with the same string comparisons (two of those bounds
  are two characters long, ``'\\u20000'``; the class reproduces what the comparisons accept);
- :func:`bleu_statistics`: sacrebleu BLEU's ``[hyp_len, ref_len, correct_1..4, total_1..4]`` for one
  reference (``_compute_segment_statistics``), from :func:`bleu_ngrams` (sacrebleu's
  ``extract_all_word_ngrams``, counted in C with :func:`ngrams`);
- :func:`chrf_statistics`: chrF's ``[hyp, ref, match] x 6`` character orders (whitespace removed,
  word order 0: sacrebleu's defaults), n-gram counting restricted to positions whose shorter n-gram
  both texts share (an n-gram both hold has every one of its sub-grams in both, so the counts of the
  shared n-grams are exact);
- :func:`lcs_length`: the longest common subsequence of two token lists with Hyyrö's bit-parallel
  algorithm (one big-integer step per token of the second list instead of a DP row);
- :func:`rouge_n`, :func:`rouge_l`: rouge-score's ``_score_ngrams`` / ``_score_lcs`` F-measures.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from typing import Sequence

from ragmem.runtime.imports import lean_import


def _ucode_class() -> str:
    """A regex character class accepting exactly the characters sacrebleu's
    ``TokenizerZh._is_chinese_char`` accepts (``start <= c <= end`` over its ranges)."""
    _UCODE_RANGES = lean_import("sacrebleu.tokenizers.tokenizer_zh")._UCODE_RANGES

    def low(bound: str) -> int:  # the least single character c with c >= bound
        return ord(bound) if len(bound) == 1 else ord(bound[0]) + 1

    def high(bound: str) -> int:  # the greatest single character c with c <= bound
        return ord(bound[0])

    parts = [(low(s), high(e)) for s, e in _UCODE_RANGES if low(s) <= high(e)]
    return "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in parts)


#: the characters without which a regex of sacrebleu's 13a post-tokenizer cannot match
_NEEDS = {r"([^0-9])([\.,])": ".,", r"([\.,])([^0-9])": ".,", r"([0-9])(-)": "-"}


@lru_cache(maxsize=1)
def _zh_pattern():
    """The CJK regex, and sacrebleu's 13a post-tokenizer as (translation table, other regexes).

    The post-tokenizer's first regex pads each of 30 ASCII punctuation characters (the space
    among them) with spaces, one substitution per character: ``str.translate`` does the same in
    one C pass. Its class is read from sacrebleu's pattern, so the two cannot drift apart. Each
    other regex comes with the characters it needs (:data:`_NEEDS`; ``""`` for a pattern not
    known here: always applied)."""
    TokenizerRegexp = lean_import("sacrebleu.tokenizers.tokenizer_re").TokenizerRegexp

    regexes = TokenizerRegexp()._re
    first = regexes[0][0].pattern  # ([\{-\~\[-\` -\&\(-\+\:-\@\/])
    padded = {c: f" {c} " for c in map(chr, range(128)) if re.fullmatch(first, c)}
    rest = [(regex, replacement, _NEEDS.get(regex.pattern, "")) for regex, replacement in regexes[1:]]
    return re.compile(f"([{_ucode_class()}])"), str.maketrans(padded), rest


def zh_tokenize(line: str) -> str:
    """sacrebleu's ``zh`` tokenization of a segment (as BLEU's ``_preprocess_segment`` calls it).

    Padding each CJK character with spaces is a ``split`` on the capturing pattern joined by
    spaces (``sub`` with a ``\\1`` template calls back into Python once per character)."""
    pattern, table, regexes = _zh_pattern()
    line = " ".join(pattern.split(line.strip())).translate(table)
    for regex, replacement, needs in regexes:
        if not needs or any(c in line for c in needs):
            line = regex.sub(replacement, line)
    return " ".join(line.split())


def clipped_overlap(a: Counter, b: Counter) -> int:
    """``Σ_g min(a[g], b[g])``: the matches of two n-gram counts (each clipped by the other)."""
    overlap = 0
    for gram, count in a.items():
        found = b.get(gram)
        if found:
            overlap += count if count < found else found
    return overlap


def bleu_ngrams(tokenized: str, max_order: int = 4) -> tuple[Counter, int]:
    """sacrebleu's ``extract_all_word_ngrams(tokenized, 1, max_order)``: the counts of every word
    n-gram (as tuples) of orders 1..``max_order``, and the number of words."""
    tokens = tokenized.split()
    counts: Counter = Counter()
    for n in range(1, max_order + 1):
        counts.update(ngrams(tokens, n))
    return counts, len(tokens)


def bleu_statistics(hyp: tuple[Counter, int], ref: tuple[Counter, int], max_order: int = 4) -> list[int]:
    """``[hyp_len, ref_len, correct_1..n, total_1..n]`` of one hypothesis against one reference,
    from their :func:`bleu_ngrams`. ``total_n`` is the number of n-grams, ``hyp_len - n + 1``
    (sacrebleu sums the counts: the same); ``correct_n`` looks only at the n-grams both hold."""
    hyp_ngrams, hyp_len = hyp
    ref_ngrams, ref_len = ref
    correct = [0] * max_order
    for ngram in hyp_ngrams.keys() & ref_ngrams.keys():
        count, found = hyp_ngrams[ngram], ref_ngrams[ngram]
        correct[len(ngram) - 1] += count if count < found else found
    return [hyp_len, ref_len, *correct, *(max(0, hyp_len - n) for n in range(max_order))]


def chrf_statistics(hyp: str, ref: str, order: int = 6) -> list[int]:
    """chrF's ``[n_hyp, n_ref, n_match]`` per character order 1..``order`` (whitespace removed).

    ``n_hyp`` is 0 for an order the reference has no n-gram of (sacrebleu: no hits without a
    reference n-gram)."""
    h, r = "".join(hyp.split()), "".join(ref.split())
    out: list[int] = []
    if h == r:  # every n-gram matches itself
        for n in range(1, order + 1):
            count = max(0, len(h) - n + 1)
            out += [count, count, count]
        return out
    # alive positions: where the n-gram starting there may also occur in the other text
    h_alive, r_alive = list(range(len(h))), list(range(len(r)))
    for n in range(1, order + 1):
        n_hyp, n_ref = max(0, len(h) - n + 1), max(0, len(r) - n + 1)
        while h_alive and h_alive[-1] + n > len(h):  # sorted: only the tail can run past the end
            h_alive.pop()
        while r_alive and r_alive[-1] + n > len(r):
            r_alive.pop()
        if not h_alive or not r_alive:
            out += [n_hyp if n_ref else 0, n_ref, 0]
            h_alive = r_alive = []
            continue
        h_grams, r_grams = [h[i:i + n] for i in h_alive], [r[j:j + n] for j in r_alive]
        hc, rc = Counter(h_grams), Counter(r_grams)
        out += [n_hyp if n_ref else 0, n_ref, clipped_overlap(hc, rc)]
        # the (n+1)-gram at i is shared only if the n-grams at i and i+1 are (a position no longer
        # alive has an n-gram the other text lacks: one of its shorter n-grams, or the next one's, was)
        h_shared = {i for i, g in zip(h_alive, h_grams) if g in rc}
        r_shared = {j for j, g in zip(r_alive, r_grams) if g in hc}
        h_alive = [i for i in h_alive if i in h_shared and i + 1 in h_shared]
        r_alive = [j for j in r_alive if j in r_shared and j + 1 in r_shared]
    return out


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (Hyyrö's bit-vector algorithm).

    ``V`` holds one bit per position of ``a``; a zero bit marks a position the LCS so far has used.

    >>> lcs_length("the cat sat".split(), "the fat cat sat".split())
    3
    """
    if not a or not b:
        return 0
    masks: dict[str, int] = {}
    for i, token in enumerate(a):
        masks[token] = masks.get(token, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for token in b:
        u = v & masks.get(token, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def fmeasure(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def ngrams(tokens: Sequence[str], n: int):
    """The ``n``-grams of ``tokens`` in order, as tuples: ``zip`` of the shifted sequences (made in C,
    not one slice per position; counted with ``Counter``, in C too)."""
    return zip(*[tokens[i:] for i in range(n)])


def ngram_counts(tokens: Sequence[str], n: int) -> Counter:
    return Counter(ngrams(tokens, n))


def rouge_n(target: Counter, prediction: Counter) -> float:
    """rouge-score's ``_score_ngrams`` F-measure from the two texts' n-gram counts."""
    overlap = clipped_overlap(target, prediction)
    target_count, prediction_count = sum(target.values()), sum(prediction.values())
    return fmeasure(overlap / max(prediction_count, 1), overlap / max(target_count, 1))


def rouge_l(target: Sequence[str], prediction: Sequence[str]) -> float:
    """rouge-score's ``_score_lcs`` F-measure (0 when either text has no token)."""
    if not target or not prediction:
        return 0.0
    lcs = lcs_length(target, prediction)
    return fmeasure(lcs / len(prediction), lcs / len(target))
