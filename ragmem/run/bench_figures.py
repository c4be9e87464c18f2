"""The figures of a memory benchmark's parent run: quality against the tokens each answer costs,
across layers, the frontier ringed (as the sweep's quality against latency)."""

from __future__ import annotations

from typing import Any

from ragmem.run.sweep import pareto_front


def figures(table: list[dict[str, Any]], scopes: list[dict[str, Any]]) -> dict[str, Any]:
    """``plots/quality_vs_tokens.png``: each finished layer's overall J (with its interval) against the
    tokens of recalled context per answer (``context tokens``: the generation tokenizer's count, named
    in ``generation.signature``); none with fewer than two layers to place."""
    overall = {r["method"]: r for r in scopes if r["scope"] == "overall"}
    placed = [(row["method"], float(row["context tokens"]), overall[row["method"]]) for row in table
              if row.get("status", "FINISHED") == "FINISHED" and row.get("context tokens") is not None
              and overall.get(row["method"], {}).get("J") is not None]
    if len(placed) < 2:
        return {}
    from ragmem.tracking import plots  # (matplotlib: loaded only when there is a figure to draw)

    tokens, quality = [p[1] for p in placed], [p[2]["J"] for p in placed]
    # (the front: cheaper is better, as lower latency is: the same dominance)
    front = pareto_front(list(zip(tokens, quality)))
    intervals = [(p[2]["ci_low"], p[2]["ci_high"]) if p[2]["ci_low"] is not None else None for p in placed]
    return {"plots/quality_vs_tokens.png": plots.pareto_figure(
        tokens, quality, [p[0] for p in placed], front, "overall J", "recalled context per answer",
        quality_ci=intervals, unit="tokens", title="Quality against tokens per answer")}
