"""The data of configs/sweep_retriever.yaml (ragmem/datasets/build_sweep.py) makes its retrievers differ:
on the 24 questions it adds, BM25 ranks every question's document first and TF-IDF puts a tag page
above it on many, so the sweep's choice of retriever is a decision (docs/sweeps.md)."""

from __future__ import annotations

import json

import ragmem
from tests.conftest import ROOT

DATASETS = ROOT / "ragmem" / "datasets"


def test_the_sweeps_questions_separate_bm25_from_tfidf():
    added = [e for e in json.loads((DATASETS / "sweep_eval.json").read_text(encoding="utf-8"))
             if e["id"].split("-")[-1].isdigit() and int(e["id"].split("-")[-1]) >= 13]
    assert len(added) == 24
    scores = {}
    for kind in ("bm25", "tfidf", "hybrid"):
        result = ragmem.evaluate(added, track=False, agent={"type": "reference"}, retriever={"type": kind, "top_k": 5},
                                 corpus={"path": str(DATASETS / "sweep_corpus.json")}, stats={"resamples": 0},
                                 metrics=["hit_rate_at_1"])
        scores[kind] = result.table.set_index("id")["hit_rate_at_1"]
    assert scores["bm25"].eq(1).all()                      # the rarer word decides: its document first
    assert (scores["tfidf"] == 0).sum() >= 8                # a tag page first on a third or more
    assert (scores["hybrid"] >= scores["tfidf"]).all() and scores["hybrid"].sum() > scores["tfidf"].sum()
