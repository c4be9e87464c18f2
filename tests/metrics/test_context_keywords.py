"""A run computes the keyword sets of the contexts only when a family it runs asks them
(``Family.context_keywords``): every family that asks a context's keywords says so, and a selection
of families that do not (``pass_rate`` and the generation metrics, say) computes none of them, with
the same values."""

from __future__ import annotations

import json

import pytest

import ragmem
from ragmem.metrics import FAMILIES
from ragmem.text.keywords import KeywordExtractor

N = 12


def _data(tmp_path) -> str:
    """Examples with everything a family can read: contexts (from a source, a quarter relevant by id),
    a reference, a label, a latency and, for every other one, the turns before it."""
    rows = []
    for i in range(N):
        row = {"id": f"e{i}", "query": f"Which port does service {i} use?", "reference_answer": f"Service {i} uses port {8000 + i}.",
               "generated_answer": f"Port {8000 + i} for service {i}." if i % 3 else "No idea.", "label": int(i % 3 > 0),
               "latency_ms": 100 + i,
               "context": [{"id": f"e{i}-c{j}", "text": f"context {i} {j}: service {i} listens on port {8000 + i + j}.",
                            "source": "memory_long" if j else "rag"} for j in range(3)]}
        if i % 4 == 0:  # gold ids; the others' relevant contexts are found by keywords (ranking's offline relevance)
            row["relevant_context_ids"] = [f"e{i}-c0"]
        if i % 2:
            row["history"] = [{"role": "user", "content": f"I run service {i} on port {8000 + i}."},
                              {"role": "assistant", "content": "Noted."}]
        rows.append(row)
    path = tmp_path / "d.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return str(path)


@pytest.fixture
def asked(monkeypatch):
    """The texts whose keyword sets were asked (``K(text)``, ``K.union``) and primed, in this process."""
    seen: dict[str, list[str]] = {"asked": [], "primed": []}
    stored, prime = KeywordExtractor._stored, KeywordExtractor.prime

    def recording_stored(self, text):
        seen["asked"].append(text)
        return stored(self, text)

    def recording_prime(self, texts, *args, **kwargs):
        seen["primed"].extend(texts)
        return prime(self, texts, *args, **kwargs)

    monkeypatch.setattr(KeywordExtractor, "_stored", recording_stored)
    monkeypatch.setattr(KeywordExtractor, "prime", recording_prime)
    return seen


def _run(path: str, metrics: list[str]):
    return ragmem.evaluate(path, track=False, metrics=metrics, stats={"resamples": 50},
                           orchestration={"workers": 1})


def _contexts(texts) -> set[str]:
    return {t for t in texts if t.startswith("context ")}


@pytest.mark.parametrize("family", [f for f in FAMILIES if f.name not in ("custom", "rubric")], ids=lambda f: f.name)
def test_a_family_that_asks_the_contexts_keywords_says_so(family, tmp_path, asked):
    _run(_data(tmp_path), [*family.names.selectable, *family.names.selectors])  # (ranking's: hit_rate_at_k, ...)
    if _contexts(asked["asked"]):
        assert family.context_keywords, f"{family.name} asked {len(_contexts(asked['asked']))} contexts' keywords"
    if family.name in ("coverage", "ranking", "rag", "per_source"):  # (these ask on this data: the declaration is used)
        assert _contexts(asked["asked"]) and family.context_keywords


def test_a_selection_without_such_a_family_computes_no_contexts_keywords(tmp_path, asked):
    path = _data(tmp_path)
    without = _run(path, ["pass_rate", "bleu", "rouge_l", "avg_latency"])
    assert not _contexts(asked["primed"]) and not _contexts(asked["asked"])
    assert asked["primed"]  # (the references and answers still are: the keyword judge reads them)
    asked["primed"].clear()
    both = _run(path, ["pass_rate", "bleu", "rouge_l", "avg_latency", "avg_coverage"])
    assert len(_contexts(asked["primed"])) == 3 * N
    assert {k: v for k, v in both.metrics.items() if k in without.metrics and k != "keywords_cache_hit_rate"} == \
        {k: v for k, v in without.metrics.items() if k != "keywords_cache_hit_rate"}
