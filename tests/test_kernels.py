"""The generation kernels against the libraries they replace, exactly, on bilingual text.

sacrebleu's statistics are integers: equal, not close. rouge-score's F-measures: to 1e-12. The
corpus is made of Chinese and English words, punctuation of both, numbers, and the awkward cases
(empty texts, whitespace only, identical texts, sacrebleu's 13a punctuation rules).
"""

import json
import random
from pathlib import Path

import pytest

from ragmem.metrics import kernels
from ragmem.metrics.generation import GenerationScorer, score_pairs

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
    seed_samples = Path(__file__).resolve().parents[2] / "shared" / "data" / "seed-samples"
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
    """The mapped function gives the same values in worker processes as in this one, chunked."""
    from ragmem import parallel

    monkeypatch.setattr(parallel, "MIN_PARALLEL_ITEMS", 1)
    pairs = PAIRS[:400]
    assert parallel.ProcessPool(2).map(score_pairs, pairs, "jieba", "zh") == score_pairs(pairs, "jieba", "zh")


def test_a_map_started_early_is_collected_once_and_only_for_the_same_input(monkeypatch):
    """MetricContext.start begins a family's map on the workers; the family's map() collects it."""
    from ragmem import parallel
    from ragmem.metrics import MetricContext
    from ragmem.text.keywords import KeywordExtractor

    monkeypatch.setattr(parallel, "MIN_PARALLEL_ITEMS", 1)
    pairs, expected = PAIRS[:200], score_pairs(PAIRS[:200], "jieba", "zh")
    ctx = MetricContext(KeywordExtractor(), mapper=parallel.ProcessPool(2))
    ctx.start(score_pairs, pairs, "jieba", "zh")
    assert len(ctx.started) == 1
    assert ctx.map(score_pairs, list(pairs), "jieba", "zh") == expected and ctx.started == {}
    ctx.start(score_pairs, pairs, "jieba", "zh")
    other = PAIRS[200:260]  # another input: computed anew, not the started one
    assert ctx.map(score_pairs, other, "jieba", "zh") == score_pairs(other, "jieba", "zh")
    serial = MetricContext(KeywordExtractor())  # no workers: start does nothing, map computes
    serial.start(score_pairs, pairs, "jieba", "zh")
    assert serial.started == {} and serial.map(score_pairs, pairs, "jieba", "zh") == expected


def test_cohen_kappa_equals_scikit_learns():
    from sklearn.metrics import cohen_kappa_score

    from ragmem.metrics.rag import cohen_kappa

    rng = random.Random(3)
    for _ in range(300):
        pairs = [(rng.randint(0, 1), rng.randint(0, 1)) for _ in range(rng.randint(2, 60))]
        if len({x for pair in pairs for x in pair}) < 2:
            continue
        expected = cohen_kappa_score([a for a, _ in pairs], [b for _, b in pairs])
        assert cohen_kappa(pairs) == pytest.approx(expected, abs=1e-12)


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
    with pytest.raises(ConfigError, match=r"rjieba: the package is not installed; pip install 'ragmem\[fast\]'"):
        get_tokenizer("rjieba")
