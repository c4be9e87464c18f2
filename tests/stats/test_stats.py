"""Bootstrap intervals and paired comparisons from per-example statistics."""

import numpy as np
import pandas as pd
import pytest

from ragmem.stats import intervals as stats


def _table(values, labels=None, verdicts=None):
    n = len(values)
    return pd.DataFrame({"id": [f"e{i}" for i in range(n)], "error": [None] * n, "coverage": values,
                         "label": labels or [1] * n, "verdict": verdicts or [1] * n,
                         "latency_s": np.linspace(0.1, 1.0, n)})


def test_mean_interval_matches_a_manual_bootstrap():
    rng = np.random.default_rng(5)
    values = rng.random(50)
    aggs = stats.aggregators(_table(list(values)), ["avg_coverage"])
    low, high = stats.bootstrap(aggs, 50, resamples=2000, seed=3)["avg_coverage"]
    idx = stats.resample_indices(50, 2000, 3)
    manual = values[idx].mean(axis=1)
    assert (low, high) == pytest.approx((np.quantile(manual, 0.025), np.quantile(manual, 0.975)))
    assert low < values.mean() < high


def test_intervals_are_reproducible_and_cover_every_kind():
    labels = [1, 0, 1, 1, 0, 1, 0, 1] * 5
    verdicts = [1, 0, 0, 1, 1, 1, 0, 1] * 5
    table = _table([0.5] * 40, labels, verdicts)
    names = ["accuracy", "precision", "recall", "f1", "avg_coverage", "latency_p95", "avg_latency"]
    aggs = stats.aggregators(table, names)
    assert set(aggs) == set(names)
    first = stats.bootstrap(aggs, 40, 500, seed=1)
    assert first == stats.bootstrap(aggs, 40, 500, seed=1)
    assert first["avg_coverage"] == (0.5, 0.5)  # no spread, no interval width
    for name in names:
        low, high = first[name]
        assert low <= aggs[name].value() <= high


def test_classification_aggregator_equals_the_metric():
    from ragmem.metrics.classification import classification_metrics

    labels, verdicts = [1, 1, 0, 0, 1, 0], [1, 0, 1, 0, 1, 0]
    aggs = stats.aggregators(_table([0.0] * 6, labels, verdicts), ["accuracy", "precision", "recall", "f1"])
    expected = classification_metrics(labels, verdicts).values
    for name, agg in aggs.items():
        assert agg.value() == pytest.approx(expected[name])


def test_paired_identical_runs_and_a_clear_difference():
    rng = np.random.default_rng(0)
    a_values = rng.random(80)
    a = stats.aggregators(_table(list(a_values)), ["avg_coverage"])["avg_coverage"]
    same = stats.paired("avg_coverage", a, a, 500, 0)
    assert same.diff == 0 and same.p_value == 1.0 and same.ci == (0.0, 0.0)
    b = stats.aggregators(_table(list(np.clip(a_values + 0.2, 0, 1))), ["avg_coverage"])["avg_coverage"]
    better = stats.paired("avg_coverage", a, b, 500, 0)
    assert better.diff > 0.1 and better.ci[0] > 0 and better.p_value < 0.01


def test_corpus_bleu_interval_from_stats():
    from ragmem.metrics.generation import GenerationScorer

    scorer = GenerationScorer()
    pairs = [("向量数据库存储向量", "向量数据库保存向量"), ("检索增强生成", "检索增强生成"), ("长期记忆", "短期记忆保存对话")] * 10
    table = pd.DataFrame({"id": range(30), "error": None,
                          "bleu_stats": [scorer.bleu_stats(h, r) for h, r in pairs]})
    agg = stats.aggregators(table, ["bleu"], scorer=scorer)["bleu"]
    from sacrebleu.metrics import BLEU

    assert agg.value() == pytest.approx(BLEU(tokenize="zh").corpus_score([h for h, _ in pairs], [[r for _, r in pairs]]).score / 100)
    low, high = stats.bootstrap({"bleu": agg}, 30, 300, 0)["bleu"]
    assert low <= agg.value() <= high


def test_corpus_bleu_is_rebuilt_with_the_runs_own_scorer():
    from sacrebleu.metrics import BLEU

    from ragmem.metrics.generation import scorer_for

    pairs = [("the cat sat on the mat", "the cat is on the mat"), ("a quick brown fox", "the quick brown fox")] * 5
    intl = scorer_for("jieba", "intl")
    table = pd.DataFrame({"id": range(10), "error": None, "bleu_stats": [intl.bleu_stats(h, r) for h, r in pairs]})
    agg = stats.aggregators(table, ["bleu"], scorer=intl)["bleu"]
    expected = BLEU(tokenize="intl").corpus_score([h for h, _ in pairs], [[r for _, r in pairs]]).score / 100
    assert agg.value() == pytest.approx(expected)
    assert intl.signature() != scorer_for("jieba", "zh").signature()
    with pytest.raises(ValueError, match="GenerationScorer is needed"):
        stats.aggregators(table, ["bleu"])  # never a silent default scorer


def test_compare_warns_when_signatures_differ():
    from ragmem.tracking.compare import signature_warnings

    a = {"keywords.signature": "tok:jieba-0.42.1|sw:none", "judge.signature": "judge:keyword|thr:0.7", "data.sha256": "x"}
    b = dict(a, **{"keywords.signature": "tok:char|sw:none"})
    assert signature_warnings([a, a]) == []
    (warning,) = signature_warnings([a, b])
    assert "keywords.signature" in warning and "not directly comparable" in warning


def test_resampling_by_counts_equals_gathering_in_any_block_size(monkeypatch):
    """Sum-kind metrics are resampled as ``counts @ data``: the same numbers as gathering each
    resample's rows, whether the resamples go in one block or in many."""
    rng = np.random.default_rng(9)
    n = 60
    labels, verdicts = list(rng.integers(0, 2, n)), list(rng.integers(0, 2, n))
    table = _table(list(rng.random(n)), labels, verdicts)
    names = ["accuracy", "f1", "avg_coverage", "latency_p95", "avg_latency"]
    aggs = stats.aggregators(table, names)
    idx = stats.resample_indices(n, 300, 4)
    one_block = stats.resample_all(aggs, n, 300, 4)
    monkeypatch.setattr(stats, "_BLOCK_ELEMENTS", 7 * n)  # 7 resamples per block, the last one short
    many_blocks = stats.resample_all(aggs, n, 300, 4)
    for name, agg in aggs.items():
        gathered = np.array([np.nan if (v := agg.with_data(agg.data[row]).value()) is None else v for row in idx])
        np.testing.assert_allclose(one_block[name], gathered, rtol=1e-12, equal_nan=True)
        np.testing.assert_allclose(many_blocks[name], gathered, rtol=1e-12, equal_nan=True)


def test_resampling_keeps_one_copy_of_the_statistics_and_the_same_values():
    """resample_all puts the sum-kind statistics side by side and gives each aggregator a view of
    its part (its own array is let go): the data and the values stay equal."""
    rng = np.random.default_rng(5)
    n = 40
    table = _table(list(rng.random(n)), list(rng.integers(0, 2, n)), list(rng.integers(0, 2, n)))
    aggs = stats.aggregators(table, ["accuracy", "f1", "avg_coverage", "latency_p95"])
    before = {name: (agg.data.copy(), agg.value()) for name, agg in aggs.items()}
    stats.resample_all(aggs, n, 50, 1)
    summed = [agg for agg in aggs.values() if agg.kind == "sum"]
    assert len({id(agg.data.base) for agg in summed}) == 1 and summed[0].data.base is not None
    for name, agg in aggs.items():
        np.testing.assert_array_equal(agg.data, before[name][0])
        assert agg.value() == before[name][1]
