"""Generation metrics: sacrebleu / rouge-score / nltk as oracles on English, hand-computed Chinese."""

import random

import pytest

from ragmem.metrics.generation import GenerationScorer, NAMES

G = GenerationScorer()

ENGLISH = [
    ("the cat sat on the mat", "the cat is on the mat"),
    ("retrieval augmented generation grounds answers in documents", "rag grounds answers in retrieved documents"),
    ("a reranker rescores candidates. it adds latency to every request", "a reranker rescores the retrieved candidates"),
    ("short term memory keeps the last turns", "long term memory keeps user facts across sessions"),
    ("bm25 needs no training data", "bm25 needs no training data"),
    ("", "something"),
]


def _random_english(rng, n=300):
    words = "the a cat dog sat on mat vector search memory keeps turns user facts index rank query".split()
    return [(" ".join(rng.choices(words, k=rng.randint(1, 15))), " ".join(rng.choices(words, k=rng.randint(1, 15))))
            for _ in range(n)]


def test_bleu_and_chrf_match_sacrebleu_on_english():
    from sacrebleu.metrics import BLEU, CHRF

    pairs = ENGLISH + _random_english(random.Random(1))
    hyps, refs = [h for h, _ in pairs], [r for _, r in pairs]
    scorer = GenerationScorer(bleu_tokenize="13a")
    stats = [scorer.bleu_stats(h, r) for h, r in pairs]
    corpus = scorer.bleu_from_stats([sum(c) for c in zip(*stats)])
    assert corpus == pytest.approx(BLEU(tokenize="13a").corpus_score(hyps, [refs]).score / 100, abs=1e-6)
    chrf_stats = [scorer.chrf_stats(h, r) for h, r in pairs]
    assert scorer.chrf_from_stats([sum(c) for c in zip(*chrf_stats)]) == pytest.approx(
        CHRF().corpus_score(hyps, [refs]).score / 100, abs=1e-6)
    sentence = BLEU(tokenize="13a", effective_order=True)
    for h, r in pairs[:50]:
        assert scorer.sentence_bleu(h, r) == pytest.approx(sentence.sentence_score(h, [r]).score / 100, abs=1e-6)
        assert scorer.sentence_chrf(h, r) == pytest.approx(CHRF().sentence_score(h, [r]).score / 100, abs=1e-6)


def test_rouge_matches_rouge_score_on_english():
    from rouge_score import rouge_scorer

    reference = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"])  # its default ASCII tokenizer
    for h, r in ENGLISH + _random_english(random.Random(2)):
        ours, theirs = G.rouge(h, r), reference.score(r, h)
        for name, key in (("rouge_1", "rouge1"), ("rouge_2", "rouge2"), ("rouge_l", "rougeL")):
            assert ours[name] == pytest.approx(theirs[key].fmeasure, abs=1e-6)


def test_bleu_1_matches_nltk_method1():
    bleu_score = pytest.importorskip("nltk.translate.bleu_score")
    smooth = bleu_score.SmoothingFunction().method1
    for h, r in ENGLISH[:-1] + _random_english(random.Random(3)) + [(c, c[::-1]) for c in IDENTICAL_CHINESE]:
        # same tokens on both sides: this checks the formula (brevity penalty, clipping, smoothing)
        expected = bleu_score.sentence_bleu([G.tokens(r)], G.tokens(h), weights=(1, 0, 0, 0), smoothing_function=smooth)
        assert G.bleu_1(h, r) == pytest.approx(expected, abs=1e-9)


IDENTICAL_CHINESE = ["向量数据库存储文本的嵌入向量。", "检索增强生成先从知识库中检索相关文档，再交给大模型生成答案。",
                     "Embedding模型把文本转换为向量，支持相似度搜索", "短期记忆保存最近几轮对话。长期记忆保存用户偏好。"]


@pytest.mark.parametrize("text", IDENTICAL_CHINESE)
def test_identical_chinese_scores_one_on_every_metric(text):
    scores = G.score(text, text)
    for name in NAMES:
        assert scores[name] == pytest.approx(1.0), name
    assert G.bleu_from_stats(scores["bleu_stats"]) == pytest.approx(1.0)
    assert G.chrf_from_stats(scores["chrf_stats"]) == pytest.approx(1.0)


def test_chinese_hand_computed():
    # jieba: 向量/数据库/存储/文本  vs  向量/数据库/保存/文本/向量
    hyp, ref = "向量数据库存储文本", "向量数据库保存文本向量"
    assert G.tokens(hyp) == ["向量", "数据库", "存储", "文本"]
    assert G.tokens(ref) == ["向量", "数据库", "保存", "文本", "向量"]
    # common multiset {向量, 数据库, 文本} = 3; P = 3/4, R = 3/5, F1 = 2*.75*.6/1.35
    assert G.token_f1(hyp, ref) == pytest.approx(2 * 0.75 * 0.6 / 1.35)
    # ROUGE-1 is the same F over unigrams; ROUGE-2: bigrams (向量 数据库) shared = 1 of 3 and 4 -> 2*(1/3)(1/4)/(7/12)
    assert G.rouge(hyp, ref)["rouge_1"] == pytest.approx(2 * 0.75 * 0.6 / 1.35)
    assert G.rouge(hyp, ref)["rouge_2"] == pytest.approx(2 * (1 / 3) * (1 / 4) / (1 / 3 + 1 / 4))
    # LCS = 向量 数据库 文本 (3): same as ROUGE-1 here
    assert G.rouge(hyp, ref)["rouge_l"] == pytest.approx(2 * 0.75 * 0.6 / 1.35)
    # BLEU-1: 3 clipped matches of 4, |hyp| 4 < |ref| 5 -> BP = exp(1 - 5/4)
    import math

    assert G.bleu_1(hyp, ref) == pytest.approx(math.exp(1 - 5 / 4) * 3 / 4)
    assert G.exact_match("向量，数据库！", "向量数据库") == 1.0  # punctuation is not content


def test_mixed_text_keeps_both_scripts_and_multi_sentence_is_scored_whole():
    assert G.tokens("RAG系统用BM25检索") == ["rag", "系统", "用", "bm25", "检索"]
    first_same = G.score("向量数据库存储向量。重排序提高精度。", "向量数据库存储向量。长期记忆保存偏好。")
    assert first_same["rouge_l"] < 0.75 and first_same["token_f1"] < 0.75  # not just the first sentence
    assert G.exact_match("The answer.", "answer") == 1.0  # articles and punctuation removed
    assert G.token_f1("", "") == 1.0 and G.token_f1("", "x") == 0.0


def test_score_equals_each_metric_and_sacrebleu_on_chinese_and_english():
    """``score`` shares the tokens and the BLEU/chrF statistics between metrics: it must give what
    each metric computed alone gives, and sentence BLEU/chrF must equal sacrebleu's sentence_score."""
    from sacrebleu.metrics import BLEU, CHRF

    pairs = ENGLISH + _random_english(random.Random(3), 40) + [
        ("向量数据库存储文本的嵌入向量。", "向量数据库保存文本向量。"), ("混合检索用RRF合并BM25和向量结果", "混合检索合并 BM25 与向量检索的结果"),
        ("", "检索增强生成"), ("检索增强生成", ""), ("短期记忆保存最近几轮对话。长期记忆保存偏好。", "短期记忆保存最近的对话")]
    sentence_bleu, chrf = BLEU(tokenize="zh", effective_order=True), CHRF()
    for h, r in pairs:
        scores = G.score(h, r)
        alone = {"bleu": G.sentence_bleu(h, r), "bleu_1": G.bleu_1(h, r), "chrf": G.sentence_chrf(h, r),
                 **G.rouge(h, r), "token_f1": G.token_f1(h, r), "exact_match": G.exact_match(h, r),
                 "bleu_stats": G.bleu_stats(h, r), "chrf_stats": G.chrf_stats(h, r)}
        assert scores == alone, (h, r)
        assert scores["bleu"] == pytest.approx(sentence_bleu.sentence_score(h, [r]).score / 100, abs=1e-9)
        assert scores["chrf"] == pytest.approx(chrf.sentence_score(h, [r]).score / 100, abs=1e-9)
    assert G.tokens("向量数据库") == ["向量", "数据库"] and isinstance(G.tokens("向量数据库"), list)


def test_a_scorer_keeps_the_tokens_of_a_bounded_number_of_texts():
    """Issue 57: an example's answer and reference are tokenized once for its four unigram scores;
    the scorer keeps the tokens of at most ``TOKENS_KEPT`` texts (16,384 held 26 MB to a 10k run's
    end), and a text scored after its tokens left is scored the same."""
    from ragmem.metrics import scorer as S

    s = GenerationScorer("rjieba")
    first = s.score("检索增强生成 0", "检索增强 生成 0")
    for i in range(S.TOKENS_KEPT + 100):
        s.score(f"answer {i}", f"reference {i}")
    assert s._cached_tokens.cache_info().currsize == S.TOKENS_KEPT
    assert s.score("检索增强生成 0", "检索增强 生成 0") == first
