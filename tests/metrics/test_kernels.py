"""The generation kernels against the libraries they replace, exactly, on bilingual text.

sacrebleu's statistics are integers: equal, not close. rouge-score's F-measures: to 1e-12. The
corpus is made of Chinese and English words, punctuation of both, numbers, and the awkward cases
(empty texts, whitespace only, identical texts, sacrebleu's 13a punctuation rules).
"""

import json
import random

import pandas as pd
import pytest

from ragmem.metrics import kernels
from ragmem.metrics.generation import GenerationScorer, score_pairs
from tests.conftest import ROOT

ZH = ("检索 增强 生成 向量 数据库 嵌入 重排序 模型 短期 记忆 长期 用户 偏好 混合 稀疏 稠密 结果 分块 上下文 答案 "
      "问题 知识库 延迟 召回率 北京 清华大学 张三 二〇二四年 会话 智能体 的 了 是 在 我们").split()
EN = "the a retrieval vector database memory user Milvus BM25 top-k 3.5 2,000 e-mail U.S. it's".split()
PUNCT = list("，。！？：；“”‘’（）—…、,.!?:;\"'()[]{}<>/&-+=_~`@#$%^*|\\") + ["&amp;", "&quot;", " - ", "\n"]
AWKWARD = [("", ""), ("", "答案"), ("answer", ""), ("   ", "x"), ("同一句话。", "同一句话。"),
           ("a , b .", "a, b."), ("1-2 3.5, 4.0.", "1 - 2 3.5 , 4.0 ."), ("“引号”—破折号…", "引号 破折号"),
           ("Top-k=5 (BM25)", "top-k = 5 [bm25]"), ("ｆｕｌｌ　ｗｉｄｔｈ　１２３", "full width 123")]


def _text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 30)):
        kind = rng.random()
        parts.append(rng.choice(ZH) if kind < 0.45 else rng.choice(EN) if kind < 0.85 else rng.choice(PUNCT))
        if rng.random() < 0.5:
            parts.append(" ")
    return "".join(parts)


def corpus(n: int = 1500, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = list(AWKWARD)
    for _ in range(n):
        ref = _text(rng)
        hyp = ref if rng.random() < 0.2 else _text(rng)
        pairs.append((hyp, ref))
    seed_samples = ROOT.parent / "shared" / "data" / "seed-samples"
    for path in sorted(seed_samples.glob("*.json")):  # the original data, when it is beside the project
        for record in json.loads(path.read_text(encoding="utf-8")):
            if isinstance(record, dict):
                texts = [str(v) for v in record.values() if isinstance(v, str)]
                pairs += list(zip(texts, texts[1:]))
    return pairs


PAIRS = corpus()


def test_the_zh_character_class_accepts_what_sacrebleu_accepts():
    from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh

    import re

    pattern = re.compile(f"[{kernels._ucode_class()}]")
    accepted = [cp for cp in range(0x30000) if TokenizerZh._is_chinese_char(chr(cp))]
    assert [cp for cp in range(0x30000) if pattern.fullmatch(chr(cp))] == accepted
    # sacrebleu's two-character bounds ('\u20000', '\u2f800') make it accept punctuation such as
    # the em dash and the ellipsis: the kernel does the same
    assert 0x2014 in accepted and 0x2026 in accepted and 0x20000 not in accepted


def test_zh_tokenize_is_sacrebleus_tokenizer():
    from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh

    zh = TokenizerZh()
    for hyp, ref in PAIRS:
        for text in (hyp, ref):
            assert kernels.zh_tokenize(text) == zh(text.rstrip()), text


@pytest.mark.parametrize("bleu_tokenize", ["zh", "13a", "intl", "char", "none"])
def test_bleu_and_chrf_statistics_equal_sacrebleus(bleu_tokenize):
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf = BLEU(tokenize=bleu_tokenize), CHRF()
    scorer = GenerationScorer("char", bleu_tokenize)
    for hyp, ref in PAIRS:
        assert scorer.bleu_stats(hyp, ref) == [int(x) for x in bleu._extract_corpus_statistics([hyp], [[ref]])[0]], (hyp, ref)
        assert scorer.chrf_stats(hyp, ref) == [int(x) for x in chrf._extract_corpus_statistics([hyp], [[ref]])[0]], (hyp, ref)


def _repetitive_pairs(n: int = 2000, seed: int = 3) -> list[tuple[str, str]]:
    """Texts of three symbols (one an ideograph, one a space) and one astral ideograph: long n-grams
    shared many times, the case the batch kernel's pruning of positions must get right."""
    rng = random.Random(seed)
    texts = ["".join(rng.choice("ab 的𠀀") for _ in range(rng.randint(0, 16))) for _ in range(2 * n)]
    return list(zip(texts[::2], texts[1::2])) + [("𠀀𠀁x", "𠀀𠀁y"), ("aaaaaaa", "aaa"), ("ab", "ab ")]


@pytest.mark.parametrize("bleu_tokenize", ["zh", "13a"])
def test_the_batch_statistics_equal_sacrebleus_pair_by_pair(bleu_tokenize):
    """Many pairs counted at once (:mod:`ragmem.metrics.batch_kernels`) give each pair's integers:
    sacrebleu's own on the bilingual corpus, the per-pair kernels' (pinned to sacrebleu above) on
    repetitive texts; and every score of ``score_many`` equals ``score``'s, whatever the batch."""
    from sacrebleu.metrics import BLEU, CHRF

    from ragmem.metrics import batch_kernels, scorer as scorer_module

    bleu, chrf = BLEU(tokenize=bleu_tokenize), CHRF()
    scorer = GenerationScorer("char", bleu_tokenize)
    hyps, refs = [h for h, _ in PAIRS], [r for _, r in PAIRS]
    assert batch_kernels.chrf_statistics_many(hyps, refs).tolist() == [
        [int(x) for x in chrf._extract_corpus_statistics([h], [[r]])[0]] for h, r in PAIRS]
    segment = scorer._bleu_segment
    assert batch_kernels.bleu_statistics_many([segment(h).split() for h in hyps], [segment(r).split() for r in refs]
                                              ).tolist() == [[int(x) for x in bleu._extract_corpus_statistics([h], [[r]])[0]]
                                                             for h, r in PAIRS]
    pairs = _repetitive_pairs()
    hyps, refs = [h for h, _ in pairs], [r for _, r in pairs]
    assert batch_kernels.chrf_statistics_many(hyps, refs).tolist() == [kernels.chrf_statistics(h, r) for h, r in pairs]
    symbols = [[list("".join(h.split())) for h in hyps], [list("".join(r.split())) for r in refs]]  # a token a character
    assert batch_kernels.bleu_statistics_many(*symbols).tolist() == [
        kernels.bleu_statistics(kernels.bleu_ngrams(" ".join(h)), kernels.bleu_ngrams(" ".join(r))) for h, r in zip(*symbols)]
    mixed = PAIRS[:700] + pairs[:400]
    assert len(mixed) > scorer_module.BATCH  # more than one batch
    assert scorer.score_many(mixed) == [scorer.score(h, r) for h, r in mixed]
    assert scorer.score_many(mixed[:1]) == [scorer.score(*mixed[0])] and scorer.score_many([]) == []


def test_the_batch_kernel_finds_no_match_across_pairs_or_without_a_text():
    from ragmem.metrics import batch_kernels

    assert batch_kernels.chrf_statistics_many(["abc", "", "x"], ["xyz", "abc", ""]).tolist() == [
        kernels.chrf_statistics("abc", "xyz"), kernels.chrf_statistics("", "abc"), kernels.chrf_statistics("x", "")]
    assert batch_kernels.chrf_statistics_many([], []).shape == (0, 18)
    assert batch_kernels.bleu_statistics_many([["a", "b"], []], [[], ["a", "b"]]).tolist() == [
        [2, 0, 0, 0, 0, 0, 2, 1, 0, 0], [0, 2, 0, 0, 0, 0, 0, 0, 0, 0]]


@pytest.mark.parametrize("tokenizer", ["jieba", "char"])
def test_rouge_equals_rouge_score_with_the_same_tokens(tokenizer):
    from rouge_score import rouge_scorer

    scorer = GenerationScorer(tokenizer)

    class Tokens:
        def tokenize(self, text):
            return scorer.tokens(text)

    reference = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], tokenizer=Tokens())
    for hyp, ref in PAIRS:
        ours, theirs = scorer.rouge(hyp, ref), reference.score(ref, hyp)
        for name, key in (("rouge_1", "rouge1"), ("rouge_2", "rouge2"), ("rouge_l", "rougeL")):
            assert abs(ours[name] - theirs[key].fmeasure) <= 1e-12, (hyp, ref, name)


def _lcs_table(a, b):
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            table[i][j] = table[i - 1][j - 1] + 1 if a[i - 1] == b[j - 1] else max(table[i - 1][j], table[i][j - 1])
    return table[-1][-1]


def test_the_bit_parallel_lcs_equals_the_dynamic_programme():
    rng = random.Random(7)
    for _ in range(2000):
        alphabet = "abcd"[: rng.randint(1, 4)]
        a = [rng.choice(alphabet) for _ in range(rng.randint(0, 90))]  # past 64: several machine words
        b = [rng.choice(alphabet) for _ in range(rng.randint(0, 90))]
        assert kernels.lcs_length(a, b) == _lcs_table(a, b), (a, b)


def test_scores_are_identical_on_a_process_pool(monkeypatch):
    """The mapped function gives the same values in worker processes as in this one, chunked. (The
    pool tests tokenize with rjieba, the default: jieba's pure-Python dictionary load in every worker
    was most of their time, and they test the pool, not the tokenizer.)"""
    from ragmem.runtime import parallel

    monkeypatch.setattr(parallel, "MIN_PARALLEL_ITEMS", 1)
    pairs = PAIRS[:400]
    assert parallel.ProcessPool(2).map(score_pairs, pairs, "rjieba", "zh") == score_pairs(pairs, "rjieba", "zh")


def test_a_map_started_early_is_collected_once_and_only_for_the_same_input(monkeypatch):
    """MetricContext.start begins a family's map on the workers; the family's map() collects it."""
    from ragmem.runtime import parallel
    from ragmem.metrics import MetricContext
    from ragmem.text.keywords import KeywordExtractor

    monkeypatch.setattr(parallel, "MIN_PARALLEL_ITEMS", 1)
    pairs, expected = PAIRS[:200], score_pairs(PAIRS[:200], "rjieba", "zh")
    ctx = MetricContext(KeywordExtractor(), mapper=parallel.ProcessPool(2))
    ctx.start(score_pairs, pairs, "rjieba", "zh")
    assert len(ctx.started) == 1
    assert ctx.map(score_pairs, list(pairs), "rjieba", "zh") == expected and ctx.started == {}
    ctx.start(score_pairs, pairs, "rjieba", "zh")
    other = PAIRS[200:260]  # another input: computed anew, not the started one
    assert ctx.map(score_pairs, other, "rjieba", "zh") == score_pairs(other, "rjieba", "zh")
    serial = MetricContext(KeywordExtractor())  # no workers: start does nothing, map computes
    serial.start(score_pairs, pairs, "rjieba", "zh")
    assert serial.started == {} and serial.map(score_pairs, pairs, "rjieba", "zh") == expected


class _Recording:
    """A mapper that records what each final map was given (and computes it in this process)."""

    def __init__(self):
        self.given = []

    def map(self, fn, items, *args):
        self.given.append(list(items))
        return fn(items, *args)


def test_maps_begun_batch_by_batch_are_taken_and_only_the_rest_is_mapped(monkeypatch):
    """EarlyMaps begins a family's map on each batch's new items (once each, from MIN_PARALLEL_ITEMS
    on); the metrics' map takes those results and maps only the rest, in the input order."""
    from ragmem.runtime import parallel
    from ragmem.metrics import MetricContext
    from ragmem.text.keywords import KeywordExtractor

    monkeypatch.setattr(parallel, "MIN_PARALLEL_ITEMS", 50)
    pairs = PAIRS[:300]
    early = parallel.EarlyMaps(parallel.ProcessPool(2))
    early.submit(score_pairs, pairs[:120], "rjieba", "zh")           # 120 new: begun
    early.submit(score_pairs, pairs[100:140], "rjieba", "zh")        # 20 new, 20 seen: gathering
    early.submit(score_pairs, pairs[100:200] + pairs[:10], "rjieba", "zh")  # 60 more new: the 80 begun
    early.submit(score_pairs, pairs[200:230], "rjieba", "zh")        # 30: still gathering at the end
    assert early.begun(score_pairs, ("rjieba", "zh")) == set(pairs[:200])
    assert early.begun(score_pairs, ("rjieba", "en")) == set()        # other arguments: nothing begun
    recording = _Recording()
    ctx = MetricContext(KeywordExtractor(), mapper=recording, early=early)
    wanted = pairs[250:] + pairs[:250] + pairs[5:6]  # any order, a repeat
    assert ctx.map(score_pairs, wanted, "rjieba", "zh") == score_pairs(wanted, "rjieba", "zh")
    begun = set(pairs[:200])
    assert recording.given == [[p for p in wanted if p not in begun]]  # only what no early map began
    assert 0 < len(recording.given[0]) < len(wanted)
    early.clear()
    assert early.begun(score_pairs, ("rjieba", "zh")) == set()


def test_rows_are_itertuples_read_column_by_column():
    from ragmem.metrics.base import rows

    table = pd.DataFrame({"id": ["a", "b", None], "n": [1, 2, 3], "x": [0.5, float("nan"), 2.0],
                          "label": pd.array([1, None, 0], dtype="Int64"), "ctx": [[{"text": "t"}], [], None],
                          "1bad name": ["p", "q", "r"]})
    table["id"] = table["id"].astype("string")
    ours, theirs = rows(table), list(table.itertuples(index=False))
    assert [r._fields for r in ours[:1]] == [theirs[0]._fields]
    for mine, reference in zip(ours, theirs, strict=True):
        for a, b in zip(mine, reference, strict=True):
            assert type(a) is type(b) and (a is b or a == b or (a != a and b != b)), (a, b)


def test_rjieba_segments_as_jieba_on_this_corpus_and_is_recorded():
    pytest.importorskip("rjieba", reason="rjieba (the fast extra) is not installed")
    from ragmem.text.tokenizers import get_tokenizer

    jieba, rjieba = get_tokenizer("jieba"), get_tokenizer("rjieba")
    texts = sorted({t for pair in PAIRS for t in pair})
    same = sum(jieba(t) == rjieba(t) for t in texts)
    assert same / len(texts) >= 0.98, f"{len(texts) - same} of {len(texts)} texts segmented differently"
    assert rjieba.signature().startswith("rjieba-") and jieba.signature().startswith("jieba-")


def test_a_missing_rjieba_is_a_one_line_config_error(monkeypatch):
    import builtins

    from ragmem.errors import ConfigError
    from ragmem.text.tokenizers import get_tokenizer

    real_import = builtins.__import__

    def no_rjieba(name, *args, **kwargs):
        if name == "rjieba":
            raise ImportError("No module named 'rjieba'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_rjieba)
    with pytest.raises(ConfigError, match=r"rjieba: the package is not installed \(a dependency of ragmem: pip install rjieba\), or choose keywords.tokenizer: jieba"):
        get_tokenizer("rjieba")


def test_word_scores_from_one_count_equal_each_scores_own_formula():
    """bleu_1, ROUGE-1, token F1 and exact match share one unigram count per text (with the
    articles taken out for the SQuAD scores): each equals its formula on its own token lists."""
    from collections import Counter
    import math

    scorer = GenerationScorer("jieba")
    articles = {"a", "an", "the"}
    pairs = PAIRS + [("the the cat", "a cat"), ("The", "a"), ("an answer", "answer the"), ("a b", "b a")]
    for hyp, ref in pairs:
        h, r = scorer.tokens(hyp), scorer.tokens(ref)
        m = sum((Counter(h) & Counter(r)).values())
        bleu_1 = 0.0 if not h or not m else (1.0 if len(h) > len(r) else math.exp(1 - len(r) / len(h))) * m / len(h)
        p, q = m / max(len(h), 1), m / max(len(r), 1)
        sh, sr = [t for t in h if t not in articles], [t for t in r if t not in articles]
        common = sum((Counter(sh) & Counter(sr)).values())
        f1 = float(sh == sr) if not sh or not sr else 0.0 if not common else \
            2 * (common / len(sh)) * (common / len(sr)) / (common / len(sh) + common / len(sr))
        scores = scorer.score(hyp, ref)
        assert scores["bleu_1"] == bleu_1 and scores["rouge_1"] == (2 * p * q / (p + q) if p + q else 0.0), (hyp, ref)
        assert scores["token_f1"] == f1 and scores["exact_match"] == float(sh == sr), (hyp, ref)


@pytest.mark.parametrize("tokenizer", ["jieba", "rjieba"])
def test_entities_tag_the_cjk_runs_as_the_text_with_every_other_character_a_space(tokenizer):
    """The tagger gets a text's CJK runs one space apart; it segments each run alone, so the
    entities are those found by tagging the whole text with each non-CJK character made a space."""
    import re

    if tokenizer == "rjieba":
        pytest.importorskip("rjieba", reason="rjieba (the fast extra) is not installed")
    from ragmem.text import entities as E
    from ragmem.text.keywords import keywords_for

    K = keywords_for(tokenizer, ("stopwords-iso:zh", "stopwords:en"))
    extract = E.OfflineEntities(K.stopwords, K.tokenizer)

    def tagged(text):  # the Chinese part, tagging the text with every other character a space
        spaced = re.sub("[^\u3400-\u9fff]", " ", text)
        return {E.normalize_entity(w) for w, f in K.tokenizer.pos_tags(spaced)
                if w.strip() and f.startswith(E._POS_KEEP)} if spaced.strip() else set()

    english = E.OfflineEntities(K.stopwords, type("NoTagger", (), {"pos_tags": staticmethod(lambda _: [])})())
    texts = sorted({t for pair in PAIRS for t in pair} | {"北京 and 上海，2024年", "张三   Zhang   清华大学"})
    for text in texts:
        assert extract(text) == english(text) | tagged(text), text


def _entity_texts(count: int) -> list[str]:
    """``count`` texts of every kind an entity comes from: the demo data's, generated bilingual ones
    (fresh words, full-width forms, CJK punctuation) and random strings of letters, spaces and marks."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from fresh import fresh_records
    finally:
        sys.path.pop(0)
    texts = [t for r in json.loads((ROOT / "ragmem/datasets/demo_bilingual.json").read_text(encoding="utf-8"))
             for t in (r.get("reference_answer") or "", *[c if isinstance(c, str) else c["text"] for c in r["context"]])]
    for r in fresh_records(count // 8):
        texts += [r["query"], r["reference_answer"], r["generated_answer"], *(c["text"] for c in r["context"])]
    rng = random.Random(7)
    letters = "ＡＢＣａｂｃ１２３，。、：“”—… \u3000\t ParisBerlin 北京上海广州2024年3月 The of Taj Mahal ’s-Ⅻﬁé\u0301"
    texts += ["".join(rng.choice(letters) for _ in range(rng.randint(5, 60))) for _ in range(count - len(texts))]
    return texts


def test_a_plain_texts_entities_each_occur_in_it_normalized():
    """What ``could_hold`` rests on: in a text of plain characters (ASCII, CJK ideographs and
    punctuation, full-width forms), every entity found, normalized, occurs in the normalized text;
    texts with other characters (a ligature, a combining accent) are never plain."""
    from ragmem.text import entities as E
    from ragmem.text.keywords import keywords_for

    K = keywords_for("rjieba", ("stopwords-iso:zh", "stopwords:en"))
    extract = E.OfflineEntities(K.stopwords, K.tokenizer)
    texts = _entity_texts(20_000)
    plain = [t for t in texts if not E._NOT_PLAIN.search(t)]
    assert len(plain) > 15_000 and all(E._NOT_PLAIN.search(t) for t in ("ﬁnance", "Cafe\u0301", "Ⅻ"))
    missing = [(t, e) for t in plain for e in extract(t) if e not in E.normalize_entity(t)]
    assert missing == []
    assert E.could_hold("Ｐａｒｉｓ，北京", ["paris"]) and not E.could_hold("Berlin 上海", ["paris", "北京"])
    assert E.could_hold("ﬁnance", ["paris"]) and not E.could_hold("anything", [])


def test_shared_entities_count_what_tagging_every_context_counts(monkeypatch):
    """``shared_entities`` (what a run maps for context_entity_recall) skips the contexts that cannot
    hold a reference entity; its counts equal those of tagging every text (the metric as defined:
    ``|E(reference) ∩ ∪ E(context)|`` over ``|E(reference)|``), with contexts tagged only where needed."""
    from ragmem.text import entities as E
    from ragmem.text.keywords import keywords_for

    stopwords = ("stopwords-iso:zh", "stopwords:en")
    K = keywords_for("rjieba", stopwords)
    extract = E.OfflineEntities(K.stopwords, K.tokenizer)
    texts = _entity_texts(4_000)  # (1,000 records of 8 texts: a reference, 6 contexts, then the next record's query)
    rng = random.Random(3)
    items = [(texts[i], tuple(texts[i + 1:i + 1 + rng.randint(0, 6)])) for i in range(0, 3_000, 8)]  # a record's own
    items += [(rng.choice(texts), tuple(rng.sample(texts, rng.randint(0, 6)))) for _ in range(1_000)]
    items += [("Paris in 2024", ("Berlin and Paris", "ﬁnance 2024")), ("", ("Paris",)), ("北京大学", ())]
    expected = []
    for reference, contexts in items:
        wanted = extract(reference)
        expected.append((len(wanted), len(wanted & set().union(*map(extract, contexts)))))
    assert E.shared_entities(items, "rjieba", stopwords) == expected
    assert expected[-3:] == [(2, 2), (0, 0), (1, 0)] and sum(w > 0 and f > 0 for w, f in expected) > 50

    tagged: list[str] = []  # the texts the tagger saw (its CJK runs, one space apart)
    counting = type("Counting", (), {"pos_tags": staticmethod(lambda text: tagged.append(text) or K.tokenizer.pos_tags(text)),
                                     "tagger_signature": K.tokenizer.tagger_signature})()
    tagger = E.OfflineEntities
    monkeypatch.setattr(E, "OfflineEntities", lambda stopwords, tokenizer: tagger(stopwords, counting))
    E.shared_entities([("北京大学和上海", ("北京大学在北京", "广州的天气", "上海和深圳"))], "rjieba", stopwords)
    assert "广州的天气" not in tagged and len(tagged) < 4
