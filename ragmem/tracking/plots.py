"""Plots logged with each run, drawn with matplotlib's object API.

Figures are built as ``matplotlib.figure.Figure`` objects (rendered by the Agg canvas when saved):
no pyplot state, no backend switch, so importing ragmem in a notebook leaves its backend alone, and
a figure is freed when it goes out of scope (nothing to close).
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure


def _subplots(width: float, height: float, ncols: int = 1):
    fig = Figure(figsize=(width, height))
    axes = fig.subplots(1, ncols, squeeze=False)
    return fig, axes[0]


#: The margins of the two plots every run draws, whose labels are known: fixed, where
#: ``tight_layout`` drew each figure once more to measure them (a histogram took 150 ms to draw and
#: save, 65 ms with these; a sweep draws two per child)
_RUN_PLOT_MARGINS = {"left": 0.17, "right": 0.97, "bottom": 0.13, "top": 0.91}  # room for 6-digit counts


def confusion_matrix_figure(counts: dict[str, float]) -> Figure:
    """2x2 matrix of label (rows) against verdict (columns)."""
    grid = [[counts.get("confusion_tn", 0), counts.get("confusion_fp", 0)],
            [counts.get("confusion_fn", 0), counts.get("confusion_tp", 0)]]
    fig, (ax,) = _subplots(4, 3.6)
    ax.imshow(grid, cmap="Blues")
    for r in range(2):
        for c in range(2):
            ax.text(c, r, f"{int(grid[r][c])}", ha="center", va="center", fontsize=14)
    ax.set_xticks([0, 1], ["verdict 0", "verdict 1"])
    ax.set_yticks([0, 1], ["label 0", "label 1"])
    ax.set_title("Confusion matrix (label vs judge)")
    fig.subplots_adjust(**_RUN_PLOT_MARGINS)
    return fig


def latency_histogram_figure(table: pd.DataFrame) -> Figure:
    """Histogram of measured call latencies in seconds (the unit of every latency ragmem shows) with
    p50/p95 marked."""
    seconds = table["latency_s"].dropna()
    fig, (ax,) = _subplots(5, 3.6)
    ax.hist(seconds, bins=min(30, max(5, len(seconds) // 2)), color="#4c72b0")
    for q, style in ((0.5, "--"), (0.95, ":")):
        value = seconds.quantile(q)
        ax.axvline(value, color="k", linestyle=style, label=f"p{int(q * 100)} = {value:.4g} s")
    ax.set_xlabel("latency (s)")
    ax.set_ylabel("examples")
    ax.set_title(f"Agent latency (n = {len(seconds)})")
    ax.legend()
    fig.subplots_adjust(**_RUN_PLOT_MARGINS)
    return fig


CHOSEN = {"marker": "*", "s": 220, "color": "#f2a900", "edgecolors": "black", "linewidths": 0.6, "zorder": 4}


def metric_by_setting_figure(table: pd.DataFrame, metric: str, keys: list[str], chosen: str | None = None) -> Figure:
    """One panel per swept key: the metric of every child (dots) and its mean per value (line); the
    child of run id ``chosen`` (the sweep's choice) is a star."""
    fig, axes = _subplots(4.2 * len(keys), 3.4, ncols=len(keys))
    for ax, key in zip(axes, keys):
        values = list(dict.fromkeys(table[key].tolist()))
        positions = {v: i for i, v in enumerate(values)}
        x = table[key].map(positions)
        ax.scatter(x, table[metric], alpha=0.6, color="#4c72b0")
        means = table.groupby(table[key].map(positions))[metric].mean()
        ax.plot(means.index, means.values, color="#c44e52", marker="o", label="mean")
        picked = table["run_id"] == chosen if chosen and "run_id" in table else None
        if picked is not None and picked.any():
            ax.scatter(x[picked], table.loc[picked, metric], label="chosen", **CHOSEN)
        ax.set_xticks(range(len(values)), [str(v) for v in values])
        ax.set_xlabel(key)
        ax.set_ylabel(metric)
        ax.legend(fontsize=8)
    fig.suptitle(f"{metric} by setting")
    fig.tight_layout()
    return fig


def pareto_figure(latency: list[float], quality: list[float], labels: list[str], front: list[int],
                  quality_name: str, latency_name: str, latency_ci=None, quality_ci=None, tied=None,
                  chosen: int | None = None, unit: str = "s", title: str = "Quality against latency") -> Figure:
    """Quality against mean latency (``unit``: s; or another cost, tokens), each point with its 95%
    intervals as bars (so a difference within the bars reads as noise); the Pareto front (no child
    cheaper and better) is joined and ringed; the configurations tied for best are filled green; the
    chosen one (index ``chosen``) is a star."""
    fig, (ax,) = _subplots(6.4, 4.4)
    n = len(latency)

    def bars(values, intervals, scale):
        intervals = intervals or [None] * n
        return [[max(0.0, v - (ci[0] * scale if ci else v)) for v, ci in zip(values, intervals)],
                [max(0.0, (ci[1] * scale if ci else v) - v) for v, ci in zip(values, intervals)]]

    if latency_ci or quality_ci:
        ax.errorbar(latency, quality, xerr=bars(latency, latency_ci, 1), yerr=bars(quality, quality_ci, 1),
                    fmt="none", ecolor="#9aa7b5", elinewidth=0.8, capsize=2, zorder=1)
    colors = ["#2e9d4b" if tied and tied[i] else "#4c72b0" for i in range(n)]
    ax.scatter(latency, quality, color=colors, alpha=0.8, zorder=2)
    if tied and any(tied):
        ax.scatter([], [], color="#2e9d4b", label="tied for best (paired test)")
    if chosen is not None:
        ax.scatter([latency[chosen]], [quality[chosen]], label=f"chosen: {labels[chosen]}", **CHOSEN)
    pts = sorted((latency[i], quality[i]) for i in front)
    ax.plot([p[0] for p in pts], [p[1] for p in pts], color="#c44e52", marker="o", mfc="none", ms=11,
            label="Pareto front")
    for i in front:
        ax.annotate(labels[i], (latency[i], quality[i]), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel(f"{latency_name} ({unit})" + (", 95% interval bars" if latency_ci else ""))
    ax.set_ylabel(quality_name + (", 95% interval bars" if quality_ci and not latency_ci else ""))
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


def race_figure(labels: list[str], judged: list[int], reasons: list[str], examples: int) -> Figure:
    """A race: one line per configuration from 0 to the examples it was judged on, ending where it
    stopped, labelled with why (``worse than ...``, ``constraint ...``, ``survived``, ``tied``, ``budget``)."""
    fig, (ax,) = _subplots(8, max(2.5, 0.32 * len(labels) + 1))
    colours = {"survived": "tab:green", "tied": "tab:green", "budget": "tab:orange"}
    for row, (n, reason) in enumerate(zip(judged, reasons)):
        colour = colours.get(reason, "tab:red" if reason.startswith(("worse", "constraint")) else "tab:gray")
        ax.plot([0, n], [row, row], color=colour, linewidth=3)
        ax.annotate(reason, (n, row), xytext=(4, 0), textcoords="offset points", va="center", fontsize=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, examples * 1.45)
    ax.axvline(examples, color="black", linewidth=0.5, linestyle=":")
    ax.set_xlabel(f"examples judged (of {examples})")
    ax.set_title("race: where each configuration stopped, and why")
    return fig
