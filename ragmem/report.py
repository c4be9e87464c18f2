"""The terminal tables of the ``ragmem`` command (rich): a run's summary, a sweep, a paired
comparison, the memory benchmark. Everything shown is also in the JSON the command writes."""

from __future__ import annotations

import re
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

out = Console(width=max(Console().width, 120))


def fmt(name: str, value: Any) -> str:
    if value is None:
        return "n/a"
    if name.startswith(("confusion_", "n_")):
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 1e5 else f"{value:.4g}"
    return str(value)


def _headline(name: str, max_k: int | None) -> bool:
    """The metrics the terminal table shows by default (all are in the JSON and in MLflow)."""
    if name.startswith(("confusion_", "n_", "undefined_", "judge_cache_hit_rate", "embeddings_")):
        return False
    if name.endswith(("_failures", "_pass_rate", "_sentence_mean")) or re.search(r"_latency_(avg|p50|p99|max)$", name):
        return False
    if any(name.endswith(f"_{s}") for s in ("rag", "memory_short", "memory_long")):
        return name.startswith(("context_share_", "hit_rate_"))
    at_k = re.match(r".*_at_(\d+)$", name)
    return not at_k or max_k is None or int(at_k.group(1)) == max_k


def print_summary(summary: dict[str, Any], show_all: bool = False) -> None:
    table = Table(title=f"{summary['experiment']}: n={summary['n_examples']}, errors={summary['n_errors']}",
                  title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("CI (bootstrap)", justify="right")
    intervals = summary.get("ci", {})
    ks = [int(k) for k in str(summary.get("params", {}).get("ranking.k", "")).split(",") if k.strip().isdigit()]
    hidden = 0
    agreement = ("accuracy", "precision", "recall", "f1")
    for name, value in summary["metrics"].items():
        if not show_all and (not _headline(name, max(ks) if ks else None) or (name in agreement and value is None)):
            hidden += 1  # (agreement with labels is shown when there are labels to agree with)
            continue
        interval = intervals.get(name)
        shown = f"[{fmt(name, interval[0])}, {fmt(name, interval[1])}]" if interval else ""
        table.add_row(name, fmt(name, value), shown)
    out.print(table)
    if any(summary["metrics"].get(name) is not None for name in agreement):
        out.print("accuracy/precision/recall/f1: the judge's agreement with the labels; pass_rate: the system as judged")
    if hidden:
        out.print(f"({hidden} more metrics in the summary JSON and in MLflow; --all shows them here)")
    counts = {k: v for k, v in summary.get("counts", {}).items() if v and k not in ("n_examples",)}
    if counts:
        out.print("counts: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    for note in summary.get("notes", []):
        out.print(f"note: {note}")
    if summary.get("run_id"):
        out.print(f"MLflow run {summary['run_id']} in experiment '{summary['experiment']}' "
                  f"(open with: ragmem ui)")


def print_sweep(result: dict[str, Any], spec) -> None:
    metric = spec.metric
    extra = [m for m in ("reference_coverage", "hit_rate_at_10", "latency_p95") if m != metric]
    table = Table(title=f"sweep {result['experiment']}: {len(result['children'])} configurations, "
                        f"objective {spec.goal} {metric}", title_justify="left")
    for column in [*(k.rsplit(".", 1)[-1] for k in spec.keys), metric, *extra, "vs top (p)", "status"]:
        table.add_column(column, overflow="fold")
    best_id = (result.get("best") or {}).get("run_id")
    for child in result["children"]:
        m = child["metrics"]
        style = "bold green" if child["run_id"] == best_id else None
        versus = child.get("vs_best") or {}
        if versus.get("is_best"):
            shown = "top"
        elif versus:
            shown = f"{versus['diff']:+.4f} ({versus['p_value']:.3f}){' worse*' if versus['significantly_worse'] else ' tied'}"
        else:
            shown = ""
        table.add_row(*[str(child["params"][k]) for k in spec.keys], *[fmt(n, m.get(n)) for n in [metric, *extra]],
                      shown, "ok" if not child["error"] else f"FAILED: {child['error'][:60]}", style=style)
    out.print(table)
    out.print("vs top: objective difference to the top child on the same examples (randomization p-value); "
              "worse* = significantly worse at p < 0.05, tied = not")
    if best_id:
        breaks = result["objective"].get("tie_break") or []
        rule = ", then ".join(f"{t['goal']} {t.get('setting') or t.get('metric')}" for t in breaks) or f"the higher {metric}"
        n_tied = len(result.get("tied_for_best") or [])
        out.print(f"{n_tied} configuration{'s' if n_tied != 1 else ''} tied for best; chosen by tie_break ({rule})",
                  markup=False, highlight=False)
        out.print(f"best: {result['best']['params']} ({metric}={fmt(metric, result['best']['metrics'][metric])}), "
                  f"run {best_id}; parent run {result['parent_run_id']}", markup=False, highlight=False)
    else:
        out.print(f"no configuration met the objective and constraints; parent run {result['parent_run_id']}")


def print_runs(table, title: str, warnings: list[str]) -> None:
    """The latest runs of an experiment: the settings that differ and the metrics."""
    import pandas as pd

    view = Table(title=title, title_justify="left")
    for column in table.columns:
        view.add_column("run" if column == "run_id" else column.rsplit(".", 1)[-1], overflow="fold")
    for _, row in table.iterrows():
        view.add_row(*[(str(v)[:8] if c == "run_id" else fmt(c, None if pd.isna(v) else v) if isinstance(v, float)
                        else ("" if v is None else str(v))) for c, v in row.items()])
    out.print(view)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)


def print_paired(result: dict[str, Any]) -> None:
    view = Table(title=f"B - A on {result['n_shared']} shared examples (A = {result['run_a'][:8]}, "
                       f"B = {result['run_b'][:8]}; {result['resamples']} resamples)", title_justify="left")
    for column in ("metric", "A", "B", "B - A", "95% CI", "p-value", ""):
        view.add_column(column, justify="left" if column in ("metric", "") else "right")
    for row in result["metrics"]:
        name = row["metric"]
        ci = f"[{fmt(name, row['ci_low'])}, {fmt(name, row['ci_high'])}]" if row["ci_low"] is not None else "n/a"
        p = row["p_value"]
        mark = "*" if p is not None and p < 0.05 else ""
        view.add_row(name, fmt(name, row["a"]), fmt(name, row["b"]),
                     "n/a" if row["diff"] is None else f"{row['diff']:+.4f}", ci,
                     "n/a" if p is None else f"{p:.4f}", mark)
    out.print(view)
    out.print("* p < 0.05 (approximate randomization test, two-sided); CI: paired bootstrap")
    if result["settings_that_differ"]:
        shown = ", ".join(f"{k}: {a} -> {b}" for k, (a, b) in list(result["settings_that_differ"].items())[:8])
        out.print(f"settings that differ: {shown}", markup=False, highlight=False)
    for warning in result["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)


def print_bench(result: dict[str, Any]) -> None:
    rows = result["results_table"]
    view = Table(title=f"{result['experiment']}: {result['n_conversations']} conversations, "
                       f"{result['n_questions']} questions (F1 token F1, B1 BLEU-1, J judge)", title_justify="left")
    view.add_column("metric")
    for row in rows:
        view.add_column(row["method"], justify="right")
    columns = [c for c in dict.fromkeys(k for row in rows for k in row) if c != "method"]
    for column in columns:
        kind = f"n_{column}" if column.endswith(("errors", "tokens")) and column != "context tokens" else column
        view.add_row(column, *[fmt(kind, row.get(column)) for row in rows])
    out.print(view)
    for method in result["methods"]:
        if method.get("error"):
            out.print(f"{method['method']} FAILED: {method['error']}", markup=False, highlight=False)
    out.print(f"parent run {result['parent_run_id']} (table: locomo_results.json; one child run per method)")
