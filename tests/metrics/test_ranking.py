"""Ranking metrics: hand-computed cases, the documented rules, and trec_eval as the oracle."""

import math
import random

import pytest

from ragmem.errors import ConfigError
from ragmem.metrics.ranking import query_metrics

# ranked ids, relevance, k, expected {metric: value}
CASES = [
    # relevant at rank 2 of 3, one relevant in total
    (["a", "b", "c"], {"b": 1}, 3, {"hit_rate": 1, "mrr": 1 / 2, "precision": 1 / 3, "recall": 1,
                                    "map": 1 / 2, "ndcg": (1 / math.log2(3)) / 1}),
    # two relevant at ranks 1 and 3, three relevant in total (one never retrieved)
    (["a", "x", "b"], {"a": 1, "b": 1, "z": 1}, 3, {"hit_rate": 1, "mrr": 1, "precision": 2 / 3,
                                                    "recall": 2 / 3, "map": (1 + 2 / 3) / 3}),
    # nothing relevant retrieved
    (["x", "y"], {"a": 1}, 3, {"hit_rate": 0, "mrr": 0, "precision": 0, "recall": 0, "map": 0, "ndcg": 0}),
    # fewer contexts than k: precision still divides by k
    (["a"], {"a": 1}, 5, {"hit_rate": 1, "precision": 1 / 5, "recall": 1, "ndcg": 1}),
    # duplicates: the repeat of "a" keeps its slot but is not relevant again
    (["a", "a", "b"], {"a": 1, "b": 1}, 3, {"precision": 2 / 3, "recall": 1, "map": (1 + 2 / 3) / 2}),
    # graded: DCG = 1/log2(2) + 3/log2(3); ideal = 3/1 + 1/log2(3)
    (["a", "b"], {"a": 1, "b": 3}, 2, {"ndcg": (1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3))}),
    # a context without id never matches
    ([None, "a"], {"a": 1}, 2, {"mrr": 1 / 2}),
]


@pytest.mark.parametrize("ranked, relevance, k, expected", CASES)
def test_hand_computed(ranked, relevance, k, expected):
    got = query_metrics(ranked, relevance, ks=[k])
    for family, value in expected.items():
        assert got[f"{family}_at_{k}"] == pytest.approx(value, abs=1e-12), family


def test_no_relevant_item_is_undefined():
    assert query_metrics(["a"], {}) is None
    assert query_metrics(["a"], {"a": 0}) is None


def test_against_trec_eval_on_random_graded_queries():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = random.Random(7)
    ks = [1, 3, 5, 10]
    qrels, runs, ours = {}, {}, {}
    for q in range(1200):
        pool = [f"d{i}" for i in range(rng.randint(1, 30))]
        qrel = {d: rng.choice([0, 0, 1, 2, 3]) for d in rng.sample(pool, rng.randint(1, len(pool)))}
        if not any(v > 0 for v in qrel.values()):
            qrel[pool[0]] = 1
        ranked = rng.sample(pool, rng.randint(1, len(pool)))
        qid = f"q{q}"
        qrels[qid] = qrel
        runs[qid] = {d: float(len(ranked) - i) for i, d in enumerate(ranked)}  # distinct scores, our order
        ours[qid] = query_metrics(ranked, qrel, ks)
    measures = {f"{m}.{','.join(map(str, ks))}" for m in ("P", "recall", "map_cut", "ndcg_cut", "success")}
    trec = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(runs)
    for k in ks:  # recip_rank has no cutoff in trec_eval: evaluate the run cut at k
        cut = {q: dict(sorted(r.items(), key=lambda kv: -kv[1])[:k]) for q, r in runs.items()}
        rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
        for qid in qrels:
            assert ours[qid][f"mrr_at_{k}"] == pytest.approx(rr[qid]["recip_rank"], abs=1e-9)
    names = {"P": "precision", "recall": "recall", "map_cut": "map", "ndcg_cut": "ndcg", "success": "hit_rate"}
    for qid, values in trec.items():
        for trec_name, ours_name in names.items():
            for k in ks:
                assert ours[qid][f"{ours_name}_at_{k}"] == pytest.approx(values[f"{trec_name}_{k}"], abs=1e-9), \
                    (qid, ours_name, k)


def _table(rows):
    import pandas as pd

    base = {"error": None, "reference_answer": "", "gold_relevance": None}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_registry_uses_gold_ids_doc_prefix_and_keyword_fallback():
    from ragmem.metrics import MetricContext, compute_metrics
    from ragmem.text.keywords import KeywordExtractor

    table = _table([
        # gold ids at document level: doc-2's first chunk is at rank 2; its second chunk is a repeat
        {"contexts": [{"id": "doc-1#c0", "text": "x"}, {"id": "doc-2#c0", "text": "y"},
                      {"id": "doc-2#c1", "text": "z"}], "gold_relevance": {"doc-2": 1.0}},
        # no gold ids: a context holding > 0.5 of K(reference) counts as relevant (rank 1 here)
        {"contexts": [{"text": "向量数据库存储embedding"}, {"text": "天气很好"}],
         "reference_answer": "向量数据库存储embedding"},
        # no relevant context at all: left out and counted
        {"contexts": [{"text": "天气很好"}], "reference_answer": "向量数据库"},
        # failed agent call: left out, not counted as "no relevant"
        {"contexts": [], "error": "TimeoutError"},
    ])
    result = compute_metrics(table, ["mrr_at_k", "precision_at_3"], MetricContext(KeywordExtractor(), ks=(1, 3)))
    assert result.values["mrr_at_1"] == pytest.approx((0 + 1) / 2)
    assert result.values["mrr_at_3"] == pytest.approx((1 / 2 + 1) / 2)
    assert result.values["precision_at_3"] == pytest.approx((1 / 3 + 1 / 3) / 2)
    assert result.values["n_ranking_no_relevant"] == 1
    assert "hit_rate_at_1" not in result.values and result.columns["mrr_at_3"][2] is None
    assert any("keyword overlap" in n for n in result.notes)

    beyond = compute_metrics(table, ["mrr_at_7"], MetricContext(KeywordExtractor(), ks=(1, 3)))
    assert beyond.values["mrr_at_7"] == pytest.approx((1 / 2 + 1) / 2)  # a k outside ranking.k, named alone

    only_ids = compute_metrics(table, ["hit_rate_at_1"], MetricContext(KeywordExtractor(), ks=(1,), relevance="ids"))
    assert only_ids.values["hit_rate_at_1"] == 0.0 and only_ids.values["n_ranking_no_relevant"] == 2


def test_selectors():
    from ragmem.metrics import expand_selection

    assert expand_selection(["ndcg_at_k", "f1", "mrr_at_7"], ks=(1, 5)) == ["ndcg_at_1", "ndcg_at_5", "f1", "mrr_at_7"]
    with pytest.raises(ConfigError, match="unknown metric"):
        expand_selection(["ndcg"])


def test_ids_that_never_meet_are_said_not_left_as_a_silent_zero():
    """The retriever names a chunk ``backup``, the labels ``backup.txt#c0``: every ranking metric is 0,
    and the run says why, with the two ids; when the schemes agree, nothing is said."""
    import ragmem

    rows = [{"id": f"q{i}", "query": f"how do I restore backup {i}?", "generated_answer": "use the backup tool",
             "contexts": [{"id": "backup", "text": "the backup tool restores"}, {"id": "restore", "text": "restore it"}],
             "relevant_context_ids": ["backup.txt#c0"]} for i in range(6)]
    apart = ragmem.evaluate(rows, track=False, metrics=["hit_rate_at_k"])
    assert apart.metrics["hit_rate_at_10"] == 0.0
    [line] = [n for n in apart.summary["notes"] if "no retrieved context id" in n]
    assert line.startswith("ranking: ids never matched: on 6 examples with gold ids, no retrieved context id is "
                           "among the relevant ones (retrieved 'backup', relevant 'backup.txt#c0')")
    agreeing = ragmem.evaluate([{**r, "relevant_context_ids": ["backup"]} for r in rows], track=False,
                               metrics=["hit_rate_at_k"])
    assert agreeing.metrics["hit_rate_at_10"] == 1.0
    assert not [n for n in agreeing.summary["notes"] if "no retrieved context id" in n]
