"""A ``retriever.top_k`` grid retrieves once per (index, query) at its deepest ``top_k``, and each
configuration still gets the contexts it would get alone (:class:`ragmem.reference.retrievers.Rankings`)."""

from __future__ import annotations

import json

import pytest

import ragmem
from ragmem.config.loading import resolve_config
from ragmem.reference import retrievers
from ragmem.run import engine
from tests.conftest import ROOT

KS = [1, 2, 3, 5, 8]


def test_a_top_k_grid_retrieves_once_per_index_and_query(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(retrievers, "_INDEXES", type(retrievers._INDEXES)())  # (an index of this test's own)
    monkeypatch.setattr(retrievers, "_RANKINGS", {})
    asked: list[int] = []
    search = retrievers.BM25Retriever.search

    def counted(self, prepared, top_k):
        asked.append(top_k)
        return search(self, prepared, top_k)

    monkeypatch.setattr(retrievers.BM25Retriever, "search", counted)
    config = resolve_config(ROOT / "configs" / "reference_agent.yaml", extra={
        "tracking": {"enabled": False}, "sweep": {"grid": {"retriever.top_k": KS}, "max_parallel": 1,
                                                  "objective": {"metric": "hit_rate_at_5", "goal": "maximize"}}})
    summary = engine.sweep(config)
    queries = {r["query"] for r in json.loads((ROOT / "ragmem" / "datasets" / "reference_eval.json").read_text())}
    assert len(summary["children"]) == len(KS)
    assert len(asked) == len(queries) and set(asked) == {max(KS)}  # once per query, at the deepest top_k
    [rankings] = retrievers._RANKINGS.values()
    assert rankings.searches == len(queries)
    # each configuration's contexts are those it gets alone (a ranking's prefix is the smaller ranking):
    # each run alone, on an index of its own, retrieving at its own top_k
    for child in summary["children"]:
        retrievers._INDEXES.clear()
        retrievers._RANKINGS.clear()
        k = child["params"]["retriever.top_k"]
        alone = ragmem.evaluate(config={**{k2: v for k2, v in config.items() if k2 != "sweep"},
                                        "retriever": {**config["retriever"], "top_k": k}}, track=False)
        assert child["metrics"]["hit_rate_at_5"] == pytest.approx(alone.metrics["hit_rate_at_5"])
        assert child["metrics"]["mrr_at_10"] == pytest.approx(alone.metrics["mrr_at_10"])
        assert child["metrics"]["avg_coverage"] == pytest.approx(alone.metrics["avg_coverage"])
    assert asked[len(queries):] and set(asked[len(queries):]) == set(KS)  # (alone: at their own depth)
