"""Synthetic bilingual examples whose texts never repeat: a fresh vocabulary for every record.

    from fresh import fresh_records, write_fresh_jsonl

The generator of ``bench_vs_ragas.py`` draws each example's six contexts from a shared pool (3.2
texts per example), so the distinct texts, and what ragmem's per-text caches absorb, grow more slowly
than the data. Real traffic repeats less. Here every record gets words of its own: each content
word spells a number that no other record uses (English: syllables; Chinese: two or three of the 3,755 most
common characters), so no query, answer, reference or context occurs twice in a file and the vocabulary grows
with the data. A few function words recur, as in any text. Within a record the texts share words,
so that the overlap metrics measure something: the reference is drawn from the record's words, the
answer is the reference (30%) or a mix of its words and others, one context of six holds the answer's
words and is the labelled relevant one.

Half the records are Chinese (about 106 characters a context, as the pooled generator), half English
(10 to 20 words a context). Seeded: the same ``n`` and ``seed`` give the same file.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

_ONSETS = "b c d f g h j k l m n p r s t v w z y x qu br ch cl cr dr fl fr gl gr kl pl pr sc sh sl sm sn sp st th tr".split()
_NUCLEI = "a e i o u ai ea ee oo ou".split()
_SYLLABLES = [o + n for o in _ONSETS for n in _NUCLEI]  # 420
_EN_FUNCTION = "the of and to in is that for with as on by from at an this which are be".split()
#: the 3,755 most common characters (GB2312's first level): words made of them segment as real text
#: does (characters from the whole CJK block, most of them rare, came out of the segmenter one by one)
_HANZI = [bytes([high, low]).decode("gb2312") for high in range(0xB0, 0xD8) for low in range(0xA1, 0xFF)
          if (high, low) < (0xD7, 0xFA)]
_ZH_FUNCTION = list("的是在了和与对从把被这那有也都就而及或")
WORDS_PER_RECORD = 48
#: a multiplier coprime to both spaces: consecutive numbers spread over the whole space (Chinese words
#: would otherwise all begin with the block's first character for the first 20,902 numbers)
_SPREAD = 2654435761
_EN_SPACE, _ZH_SPACE = len(_SYLLABLES) ** 3, len(_HANZI) ** 2  # 74M and 14M words: a million records take 48M


def _english_word(number: int, rng: random.Random) -> str:
    """A pseudo-word that spells ``number`` in three syllables (no two numbers give the same word)."""
    number, parts = number * _SPREAD % _EN_SPACE, []
    for _ in range(3):
        number, digit = divmod(number, len(_SYLLABLES))
        parts.append(_SYLLABLES[digit])
    return "".join(parts)


def _chinese_word(number: int, rng: random.Random) -> str:
    """Two characters that spell ``number`` (beyond the 14M two-character words, a third says which
    round of them: no two numbers give the same word), sometimes one more at random."""
    rounds, rest = divmod(number, _ZH_SPACE)
    high, low = divmod(rest * _SPREAD % _ZH_SPACE, len(_HANZI))
    word = _HANZI[high] + _HANZI[low] + (_HANZI[rounds - 1] if rounds else "")
    return word + rng.choice(_HANZI) if rng.random() < 0.3 else word


def _text(rng: random.Random, words: list[str], chinese: bool, low: int, high: int) -> str:
    """``low``-``high`` words (English) or characters (Chinese) of ``words`` and function words."""
    if chinese:
        size, out = rng.randint(low, high), []
        while sum(map(len, out)) < size:
            out.append(rng.choice(words) if rng.random() < 0.75 else rng.choice(_ZH_FUNCTION))
        return "".join(out) + "。"
    chosen = [rng.choice(words) if rng.random() < 0.7 else rng.choice(_EN_FUNCTION) for _ in range(rng.randint(low, high))]
    return " ".join(chosen).capitalize() + "."


def fresh_records(n: int, seed: int = 0) -> Iterator[dict]:
    """``n`` examples (the fields of ``bench_vs_ragas.synthetic``), no text of one in any other."""
    rng = random.Random(seed)
    for i in range(n):
        chinese = i % 2 == 0
        word = _chinese_word if chinese else _english_word
        own = [word(i * WORDS_PER_RECORD + j, rng) for j in range(WORDS_PER_RECORD)]
        answer_words, other_words = own[:16], own[16:]
        span = (20, 40)  # words or characters, as the pooled generator's
        reference = _text(rng, answer_words, chinese, *span)
        answer = reference if rng.random() < 0.3 else _text(rng, answer_words[:10] + other_words[:10], chinese, *span)
        context_span = (80, 130) if chinese else (10, 20)
        relevant = rng.randrange(6)
        contexts = [_text(rng, answer_words if k == relevant else other_words, chinese, *context_span) for k in range(6)]
        yield {"id": f"e{i}", "query": _text(rng, answer_words, chinese, 6, 12), "reference_answer": reference,
               "generated_answer": answer, "label": rng.randint(0, 1),
               "context": [{"id": f"e{i}-c{k}", "text": text} for k, text in enumerate(contexts)],
               "relevant_context_ids": [f"e{i}-c{relevant}"]}


def write_fresh_jsonl(path: Path, n: int, seed: int = 0) -> None:
    """:func:`fresh_records` as JSONL, one record at a time (a million would take gigabytes as a list)."""
    with open(path, "w", encoding="utf-8") as handle:
        for record in fresh_records(n, seed):
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
