"""The per-scope table of ``ragmem bench-memory`` (:func:`ragmem.memory.bench_compare.per_category`):
each layer's J per ability (BEAM) or category, with its bootstrap interval, evidence recall and,
for event ordering, Kendall's tau; and what the overall score is for the dataset."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from ragmem.memory.bench_data import DATASETS
from ragmem.report.terminal import _column, out, say


def print_scopes(result: dict[str, Any]) -> None:
    """The table, one row per scope, a column per layer: ``J [low, high]``, then evidence recall and tau;
    then each layer's flags (the lifecycle suite: deleted facts still recalled)."""
    _print_scope_table(result)
    for method in result.get("methods", []):
        for tag, flag in (method.get("flags") or {}).items():
            say(f"FLAGGED {method['method']}: {flag} (MLflow tag {tag})")
    paths = {m["method"]: {k[len("path_"):-len("_api")]: "api" if v else "statement"
                           for k, v in m.get("metrics", {}).items() if k.startswith("path_") and v is not None}
             for m in result.get("methods", [])}
    for method, used in paths.items():
        if used:
            say(f"{method}: " + ", ".join(f"{op} through {'its own ' + op + '()' if way == 'api' else 'the user’s statement'}"
                                          for op, way in sorted(used.items())))


def _print_scope_table(result: dict[str, Any]) -> None:
    found = result.get("per_category") or []
    if not found:
        return
    methods = list(dict.fromkeys(r["method"] for r in found))
    by = {(r["method"], r["scope"]): r for r in found}
    unit = {"beam": "ability", "lifecycle": "scenario"}.get(str(result.get("dataset")), "category")
    view = Table(title=f"J per {unit} with its "
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
    resampled = {r["resampled"] for r in found}
    say({frozenset({"conversations"}): "intervals: conversations resampled together",
         frozenset({"questions"}): "intervals: questions resampled alone (fewer than 5 conversations are too few to "
                                   "resample; the intervals may be too narrow)"}.get(
        frozenset(resampled), "intervals: conversations resampled together in a scope of 5 or more, questions alone in "
                              "the others (their intervals may be too narrow)"))
    if result.get("dataset") == "lifecycle":  # what each layer fails, by scenario
        for method in methods:
            failed = [f"{r['scope']} (J {r['J']:.2f})" for r in found if r["method"] == method
                      and r["scope"] != "overall" and r["J"] is not None and r["J"] < 1]
            if failed:
                say(f"{method} fails: {', '.join(failed)}")
    data = DATASETS[result.get("dataset", "locomo")]
    if data.by_rubric:
        offline = str((result.get("manifest") or {}).get("judge", "")).startswith("judge:keyword")
        say("J: each question the mean of its rubric items, each scored 0 / 0.5 / 1 "
            + ("(offline: an item matched by its keywords in the answer, an abstention by the answer saying the "
               "information is not there; an LLM judge scores each item)" if offline else "by the LLM judge")
            + "; overall: every ability, abstention included")
