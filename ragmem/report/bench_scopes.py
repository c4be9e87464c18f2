"""The per-scope table of ``ragmem bench-memory`` (:func:`ragmem.memory.bench_compare.per_category`):
each layer's J per ability (BEAM) or category, with its bootstrap interval, evidence recall and,
for event ordering, Kendall's tau; and what the overall score is for the dataset."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from ragmem.memory.bench_data import DATASETS
from ragmem.report.terminal import _column, out, say


def print_scopes(result: dict[str, Any]) -> None:
    """The table, one row per scope, a column per layer: ``J [low, high]``, then evidence recall and tau."""
    found = result.get("per_category") or []
    if not found:
        return
    methods = list(dict.fromkeys(r["method"] for r in found))
    by = {(r["method"], r["scope"]): r for r in found}
    view = Table(title=f"J per {'ability' if result.get('dataset') == 'beam' else 'category'} with its "
                       f"{result.get('confidence', 0.95):.0%} bootstrap interval (evidence recall; tau: event order)",
                 title_justify="left")
    _column(view, "scope", numeric=False)
    for method in methods:
        _column(view, method)
    for scope in dict.fromkeys(r["scope"] for r in found):
        cells = []
        for method in methods:
            r = by.get((method, scope))
            if r is None or r["J"] is None:
                cells.append("n/a")
                continue
            ci = "" if r["ci_low"] is None else f" [{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
            extra = [f"rec {r['evidence_recall']:.2f}"] if r["evidence_recall"] is not None else []
            extra += [f"tau {r['order_tau']:+.2f}"] if r["order_tau"] is not None else []
            cells.append(f"{r['J']:.3f}{ci}" + (f" ({', '.join(extra)})" if extra else ""))
        view.add_row(f"{scope} (n={max(by[(m, scope)]['n'] for m in methods if (m, scope) in by)})", *cells)
    out.print(view)
    unit = {r["resampled"] for r in found}
    clusters = max(r["n_clusters"] for r in found)
    say("intervals: conversations resampled together" if unit == {"conversations"} else
        f"intervals: questions resampled alone ({clusters} conversations: fewer than 5 are too few to resample; the "
        f"intervals may be too narrow)")
    data = DATASETS[result.get("dataset", "locomo")]
    if data.by_rubric:
        offline = str((result.get("manifest") or {}).get("judge", "")).startswith("judge:keyword")
        say("J: each question the mean of its rubric items, each scored 0 / 0.5 / 1 "
            + ("(offline: an item matched by its keywords in the answer, an abstention by the answer saying the "
               "information is not there; an LLM judge scores each item)" if offline else "by the LLM judge")
            + "; overall: every ability, abstention included")
