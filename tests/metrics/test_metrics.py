"""Metric formulas against hand-computed values, scikit-learn, and their defined edge cases."""

import math

import numpy as np
import pandas as pd
import pytest

from ragmem.errors import ConfigError
from ragmem.metrics import compute_metrics, MetricContext

ISSUE2_METRICS = ["accuracy", "precision", "recall", "f1", "avg_coverage", "reference_coverage",
                  "avg_latency", "latency_p50", "latency_p95", "latency_p99", "latency_max"]
from ragmem.metrics._division import divide, parse_zero_division
from ragmem.metrics.classification import classification_metrics, confusion_counts
from ragmem.metrics.coverage import coverage
from ragmem.metrics.latency import latency_stats
from ragmem.text.keywords import KeywordExtractor

K = KeywordExtractor()

# labels, verdicts, expected (accuracy, precision, recall, f1)
CLASSIFICATION_CASES = [
    # tp=2 fn=1 fp=1 tn=1: acc 3/5, p 2/3, r 2/3, f1 4/6
    ([1, 1, 1, 0, 0], [1, 1, 0, 1, 0], (3 / 5, 2 / 3, 2 / 3, 4 / 6)),
    # all correct
    ([1, 0, 1], [1, 0, 1], (1.0, 1.0, 1.0, 1.0)),
    # seed-like: tp=0 fn=8 fp=1 tn=7
    ([1] * 8 + [0] * 8, [0] * 8 + [1] + [0] * 7, (7 / 16, 0.0, 0.0, 0.0)),
]


@pytest.mark.parametrize("labels, verdicts, expected", CLASSIFICATION_CASES)
def test_classification_hand_computed(labels, verdicts, expected):
    values = classification_metrics(labels, verdicts).values
    got = tuple(values[n] for n in ("accuracy", "precision", "recall", "f1"))
    assert got == pytest.approx(expected)


def test_classification_matches_sklearn_binary():
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support

    rng = np.random.default_rng(0)
    cases = [([0], [0]), ([1], [0]), ([0], [1]), ([0, 0, 0], [0, 0, 0]), ([1, 1], [1, 1]), ([0, 1], [0, 0])]  # 0/0s
    for _ in range(50):  # (sklearn takes ~5 ms a call: 50 random tables of 1 to 29 examples, and the edges above)
        n = int(rng.integers(1, 30))
        cases.append((rng.integers(0, 2, n).tolist(), rng.integers(0, 2, n).tolist()))
    for labels, verdicts in cases:
        for zd in (0.0, 1.0):
            values = classification_metrics(labels, verdicts, zero_division=zd).values
            precision, recall, f1, _ = precision_recall_fscore_support(labels, verdicts, average="binary",
                                                                       zero_division=zd)
            assert values["accuracy"] == pytest.approx(accuracy_score(labels, verdicts))
            assert (values["precision"], values["recall"], values["f1"]) == pytest.approx((precision, recall, f1))


def test_confusion_counts_and_undefined():
    assert confusion_counts([1, 1, 0, 0], [1, 0, 1, 0]) == {"tp": 1, "fn": 1, "fp": 1, "tn": 1}
    # nothing judged correct and no positive label: precision, recall and f1 are 0/0
    result = classification_metrics([0, 0], [0, 0], zero_division=math.nan)
    assert result.values["accuracy"] == 1.0
    assert all(math.isnan(result.values[n]) for n in ("precision", "recall", "f1"))
    assert result.undefined == {"accuracy": 0, "precision": 1, "recall": 1, "f1": 1}
    assert classification_metrics([], [], zero_division=0.0).undefined["accuracy"] == 1
    with pytest.raises(ValueError, match="0 or 1"):
        confusion_counts([2], [1])
    with pytest.raises(ValueError, match="length"):
        confusion_counts([1], [1, 0])


# target keywords, source keywords, expected |source ∩ target| / |target|
COVERAGE_CASES = [
    ({"向量", "数据库", "存储"}, {"向量", "存储", "检索"}, 2 / 3),
    ({"reranker", "precision"}, {"reranker", "precision", "top"}, 1.0),
    ({"a"}, set(), 0.0),
]


@pytest.mark.parametrize("target, source, expected", COVERAGE_CASES)
def test_coverage(target, source, expected):
    assert coverage(target, source, 0.0) == (pytest.approx(expected), False)


def test_coverage_empty_target_follows_zero_division():
    assert coverage(set(), {"x"}, 0.0) == (0.0, True)
    assert coverage(set(), {"x"}, 1.0) == (1.0, True)
    assert math.isnan(coverage(set(), {"x"}, math.nan)[0])


def test_zero_division_setting():
    assert parse_zero_division(0) == 0.0 and parse_zero_division("1") == 1.0
    assert math.isnan(parse_zero_division("NaN"))
    with pytest.raises(ConfigError, match="zero_division"):
        parse_zero_division("2")
    assert divide(1, 0, 0.0) == (0.0, True) and divide(1, 4, 0.0) == (0.25, False)


def test_latency_stats():
    stats = latency_stats([0.1, 0.2, 0.3, 0.4, None, float("nan")])
    assert stats["avg_latency"] == pytest.approx(0.25)
    assert stats["latency_p50"] == pytest.approx(0.25)
    assert stats["latency_p95"] == pytest.approx(np.percentile([0.1, 0.2, 0.3, 0.4], 95))
    assert stats["latency_p99"] == pytest.approx(0.397)
    assert stats["latency_max"] == pytest.approx(0.4)
    assert latency_stats([None, None]) == {n: None for n in stats}  # not measured, never 0
    assert set(latency_stats([1.0], prefix="retrieve")) == {
        "retrieve_latency_avg", "retrieve_latency_p50", "retrieve_latency_p95",
        "retrieve_latency_p99", "retrieve_latency_max"}


def _table(rows):
    base = {"error": None, "judge_error": None, "latency_s": None, "label": None, "verdict": None,
            "contexts": []}
    table = pd.DataFrame([{**base, **r} for r in rows])
    for column in ("label", "verdict"):
        table[column] = table[column].astype("Int64")
    table["latency_s"] = table["latency_s"].astype(float)
    return table


def test_compute_metrics_end_to_end_hand_computed():
    table = _table([
        # coverage: K(gen)={向量,存储}, C={向量,数据库} -> 1/2 ; reference K={向量,数据库,存储} -> 2/3
        {"generated_answer": "向量存储", "reference_answer": "向量数据库存储", "label": 1, "verdict": 1,
         "contexts": [{"text": "向量"}, {"text": "数据库"}], "latency_s": 1.0, "stage_retrieve_s": 0.25},
        # English: K(gen)={memory, keeps, turns}, C={memory, keeps, last, turns} -> 1 ; K(ref)={last, turns} -> 1
        {"generated_answer": "memory keeps turns", "reference_answer": "last turns", "label": 0, "verdict": 1,
         "contexts": [{"text": "memory keeps the last turns"}], "latency_s": 3.0, "stage_retrieve_s": 0.75},
        # failed agent call: excluded from coverage and classification, latency still counts
        {"generated_answer": None, "reference_answer": "x", "label": 1, "error": "TimeoutError",
         "latency_s": 5.0},
    ])
    result = compute_metrics(table, ISSUE2_METRICS, MetricContext(K))
    v = result.values
    assert v["avg_coverage"] == pytest.approx((0.5 + 1.0) / 2)
    assert v["reference_coverage"] == pytest.approx((2 / 3 + 1.0) / 2)
    assert (v["confusion_tp"], v["confusion_fp"], v["n_classified"]) == (1, 1, 2)
    assert v["precision"] == 0.5 and v["recall"] == 1.0
    assert v["avg_latency"] == pytest.approx(3.0) and v["latency_max"] == 5.0
    assert v["retrieve_latency_avg"] == pytest.approx(0.5)
    assert result.columns["coverage"][2] is None


def test_selection_and_unknown_metric():
    table = _table([{"generated_answer": "a b", "reference_answer": "a b", "label": 1, "verdict": 1,
                     "latency_s": 1.0, "stage_llm_s": 0.5}])
    result = compute_metrics(table, ["f1", "latency_p95"], MetricContext(K))
    assert "accuracy" not in result.values and "avg_coverage" not in result.values
    assert {"f1", "latency_p95", "llm_latency_p95"} <= set(result.values)
    assert "avg_latency" not in result.values and "llm_latency_avg" not in result.values
    with pytest.raises(ConfigError, match="unknown metric"):
        compute_metrics(table, ["mrr"], MetricContext(K))


def test_no_labels_means_not_computed_not_zero():
    table = _table([{"generated_answer": "a", "reference_answer": "a", "verdict": 1}])
    result = compute_metrics(table, ["accuracy", "f1"], MetricContext(K))
    assert result.values["accuracy"] is None and "no labels" in result.notes[0]


def test_the_registry_runs_a_family_for_every_declared_name_set_in_order():
    """The names are declared in the pandas-free leaf (what the schema reads); every set of them has
    its family in the registry, in the same order."""
    from ragmem.metrics import FAMILIES, names

    assert tuple(f.names for f in FAMILIES) == names.FAMILY_NAMES
    assert [f.name for f in FAMILIES] == ["verdicts", "reliability", "classification", "coverage", "latency", "ranking", "generation",
                                          "rag", "rubric", "per_source", "conversation", "custom"]
