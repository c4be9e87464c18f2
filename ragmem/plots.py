"""Plots logged with each run (matplotlib, headless)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def confusion_matrix_figure(counts: dict[str, float]):
    """2x2 matrix of label (rows) against verdict (columns)."""
    grid = [[counts.get("confusion_tn", 0), counts.get("confusion_fp", 0)],
            [counts.get("confusion_fn", 0), counts.get("confusion_tp", 0)]]
    fig, ax = plt.subplots(figsize=(4, 3.6))
    ax.imshow(grid, cmap="Blues")
    for r in range(2):
        for c in range(2):
            ax.text(c, r, f"{int(grid[r][c])}", ha="center", va="center", fontsize=14)
    ax.set_xticks([0, 1], ["verdict 0", "verdict 1"])
    ax.set_yticks([0, 1], ["label 0", "label 1"])
    ax.set_title("Confusion matrix (label vs judge)")
    fig.tight_layout()
    return fig


def latency_histogram_figure(table: pd.DataFrame):
    """Histogram of measured call latencies (seconds) with p50/p95 marked."""
    seconds = table["latency_s"].dropna()
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.hist(seconds, bins=min(30, max(5, len(seconds) // 2)), color="#4c72b0")
    for q, style in ((0.5, "--"), (0.95, ":")):
        value = seconds.quantile(q)
        ax.axvline(value, color="k", linestyle=style, label=f"p{int(q * 100)} = {value:.3f} s")
    ax.set_xlabel("latency (s)")
    ax.set_ylabel("examples")
    ax.set_title(f"Agent latency (n = {len(seconds)})")
    ax.legend()
    fig.tight_layout()
    return fig


def close(fig) -> None:
    plt.close(fig)
