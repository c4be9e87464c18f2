"""Memory layers against a baseline on the same questions, and a benchmark against its own rerun.

``ragmem bench-memory`` compares every layer with the first one (or ``bench.baseline``), pair by pair
of answers to the same question; every benchmark logs a manifest (:func:`manifest`) from which
``ragmem bench-memory --rerun PARENT_RUN_ID`` runs it again and compares each layer with its first
run the same way (:func:`rerun_comparison`).

For each layer, each scope (the overall, each category, and abstention) and each
score (J, the judge's verdict; F1, token F1; abstention has J only), on the questions both layers
scored::

    diff = mean(layer) - mean(baseline)

with its paired-bootstrap interval and approximate-randomization p-value, the test of ``ragmem
compare`` (:func:`ragmem.stats.intervals.paired`), seeded. The questions of one conversation (of one
haystack in LongMemEval) are not independent: they are resampled and swapped together, a cluster
bootstrap with expanded percentile levels (:mod:`ragmem.stats.clusters`), when there are at least
``MIN_CLUSTERS`` (5) of them; with fewer (LoCoMo's first conversation alone) the questions are
resampled alone, and each row says which (``resampled``: clusters or questions, ``n_clusters``). A layer has up to 11 such figures against the
baseline, and at 95% each is "significant" by noise alone one time in twenty: on LoCoMo's first
conversation, three pairs of the same noisy layer with different seeds had 2, 1 and 1 of their 11
category figures outside 0. So a difference is **marked** when its interval excludes 0 *and* its
p-value stays below ``1 - stats.confidence`` after Holm's step-down correction over that layer's
figures (``p_holm``): the chance that noise marks any figure of a layer stays at 5%. The reference
memory against ``no_memory`` on that conversation is marked (p 0.0025, the smallest 400 resamples
can give).
"""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from ragmem.config.secrets import mask
from ragmem.memory.bench_data import BenchData, DATASETS
from ragmem.metrics.base import mean_aggregator
from ragmem.stats import clusters
from ragmem.stats import intervals as stats
from ragmem.stats.multiplicity import holm

SCORES = (("J", "judge_score"), ("F1", "token_f1"))


def _scopes(categories: Sequence[int], data: BenchData) -> list[tuple[str, set[int]]]:
    answered = [c for c in categories if c != data.abstention]
    overall = set(categories) if data.overall_abstention else set(answered)  # (BEAM: abstention an ability)
    scopes = [("overall", overall)] if answered else []
    scopes += [(data.categories[c], {c}) for c in answered]
    if data.abstention in categories:  # (named abstention; in an overall of every category, by its own name)
        scopes.append((data.categories[data.abstention] if data.overall_abstention else "abstention", {data.abstention}))
    return scopes


def _key(row: dict[str, Any]) -> tuple:
    return row["conversation"], row["question"], row["category"]


def paired_layers(rows: dict[str, list[dict[str, Any]]], baseline: str, categories: Sequence[int],
                  resamples: int = 1000, seed: int = 0, confidence: float = 0.95,
                  data: BenchData = DATASETS["locomo"]) -> list[dict[str, Any]]:
    """Every layer of ``rows`` (method -> its per-question rows, :func:`ragmem.memory.benchmark.score`)
    against ``baseline``: one dict per (method, scope, score)."""
    base = rows.get(baseline)
    if not base:
        return []
    out = []
    for method, theirs in rows.items():
        if method == baseline or not theirs:
            continue
        mine: dict[Any, Any] = {}
        for row in theirs:  # (a question asked twice in a conversation: each occurrence in order)
            mine.setdefault(_key(row), []).append(row)
        taken: dict[tuple, int] = {}
        aligned = []
        for row in base:
            key = _key(row)
            n = taken.get(key, 0)
            if n < len(mine.get(key, [])):
                aligned.append((row, mine[key][n]))
                taken[key] = n + 1
        for scope, members in _scopes(categories, data):
            for label, column in SCORES:
                if scope == "abstention" and column != "judge_score":
                    continue  # an abstention has no answer to overlap with
                pairs = [(a[column], b[column], a) for a, b in aligned if a["category"] in members
                         and a[column] is not None and b[column] is not None]
                if not pairs:
                    continue
                first = mean_aggregator(pd.Series([p[0] for p in pairs], dtype=float))
                second = mean_aggregator(pd.Series([p[1] for p in pairs], dtype=float))
                ids = [f"{_key(row)}#{n}" for n, (_, _, row) in enumerate(pairs)]
                groups = [row.get("cluster", row["conversation"]) for _, _, row in pairs]
                count = clusters.resampled(len(set(groups)))
                keys = clusters.resampling_keys(ids, groups) if count else None  # (too few: classic, as before)
                result = stats.paired(label, first, second, resamples, seed, confidence, keys, clusters=count).to_dict()
                unit = {"resampled": "clusters" if count else "questions", "n_clusters": len(set(groups))}
                out.append({"method": method, "baseline": baseline, "scope": scope, "score": label, **result, **unit})
    for method in dict.fromkeys(r["method"] for r in out):
        holm([r for r in out if r["method"] == method], 1 - confidence)
    return out


def manifest(cfg, specs, judge_signature: str, data_sha256: str, prompt_version: str) -> dict[str, Any]:
    """What makes a benchmark's result reproducible: the data file's sha256, the category mapping, the
    question limits and how questions were chosen, the judge and its prompt version, the generator,
    top_k, every layer's settings, and the whole config (secrets masked) that ``--rerun`` runs again."""
    bench = cfg.bench
    data = DATASETS[bench.dataset]
    return {"benchmark": data.name, "data": {"path": str(bench.data), "sha256": data_sha256},
            "categories": data.mapping(),
            "limit_conversations": bench.limit_conversations, "limit_questions": bench.limit_questions,
            "question_selection": data.selection, "judge": judge_signature, "prompt_version": prompt_version,
            "generator": mask(cfg.generator.model_dump(mode="json")), "top_k": bench.top_k,
            "full_context_tokens": bench.full_context_tokens,
            "methods": [mask(s.model_dump(mode="json", exclude_none=True)) for s in specs],
            "config": mask(cfg.raw)}


def rerun_comparison(first: dict[str, list[dict[str, Any]]], again: dict[str, list[dict[str, Any]]],
                     categories: Sequence[int], resamples: int = 1000, seed: int = 0,
                     confidence: float = 0.95, data: BenchData = DATASETS["locomo"]) -> list[dict[str, Any]]:
    """Each layer of a rerun against its first run (method -> per-question rows of each): whether
    every per-question score is identical, and the paired figures (:func:`paired_layers`)."""
    out: list[Any] = []
    for method, rows in again.items():
        before = first.get(method)
        if not before or not rows:
            out.append({"method": method, "identical": None, "paired": []})
            continue
        same = len(before) == len(rows) and all(
            _key(a) == _key(b) and all(a[c] == b[c] for _, c in SCORES) for a, b in zip(before, rows))
        paired = paired_layers({"first": before, "rerun": rows}, "first", categories, resamples, seed, confidence, data)
        out.append({"method": method, "identical": same, "paired": paired})
    return out


def per_category(rows: dict[str, list[dict[str, Any]]], categories: Sequence[int], resamples: int = 1000,
                 seed: int = 0, confidence: float = 0.95, data: BenchData = DATASETS["locomo"]) -> list[dict[str, Any]]:
    """Each layer's J per scope (overall, each category, abstention) with its bootstrap interval,
    the questions of a conversation resampled together when there are at least ``MIN_CLUSTERS`` of
    them (alone otherwise, and said: ``resampled``), with the scope's mean evidence recall and, where
    it has one, Kendall's tau of the event orders (BEAM): the per-ability table."""
    out = []
    for method, theirs in rows.items():
        for scope, members in _scopes(categories, data):
            chosen = [r for r in theirs or () if r["category"] in members]
            scored = [r for r in chosen if r["judge_score"] is not None]
            groups = [r.get("cluster", r["conversation"]) for r in scored]
            count = clusters.resampled(len(set(groups)))
            keys = clusters.resampling_keys([f"{_key(r)}#{n}" for n, r in enumerate(scored)], groups) if count else None
            aggregator = mean_aggregator(pd.Series([r["judge_score"] for r in scored], dtype=float))
            ci = stats.bootstrap({"J": aggregator}, len(scored), resamples, seed, confidence, keys, count)["J"]

            out.append({"method": method, "scope": scope, "n": len(chosen), "n_scored": len(scored),
                        "J": _mean(chosen, "judge_score"),
                        "ci_low": None if ci is None else float(ci[0]), "ci_high": None if ci is None else float(ci[1]),
                        "evidence_recall": _mean(chosen, "evidence_recall"), "order_tau": _mean(chosen, "order_tau"),
                        "resampled": "conversations" if count else "questions", "n_clusters": len(set(groups))})
    return out


def _mean(rows: list[dict[str, Any]], column: str) -> float | None:
    values = [r[column] for r in rows if r.get(column) is not None]
    return float(sum(values) / len(values)) if values else None
