"""What one evaluation run leaves in MLflow (:func:`record_run`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ragmem.tracking.lifecycle import TrackedRun, log_results

def record_run(run: TrackedRun, resolved_config: dict[str, Any], params: dict[str, str],
               metrics: dict[str, float | None], counts: dict[str, int], table: pd.DataFrame,
               summary: dict[str, Any], examples=(), outputs=(), max_traces: int = 0,
               extra_files: tuple[Path, ...] = ()) -> int:
    """Log one evaluation run: agent traces, params, metrics (+ counts and ``{metric}_ci_low/high``),
    the resolved config, ``summary.json``, the per-example table (``examples.csv`` and the MLflow
    table ``examples.json``), the plots and ``extra_files`` (the journal). Idempotent (see
    :func:`log_results`; traces are written once). Returns the number of traces."""
    from ragmem import plots

    if run.id is None:
        return 0
    traced = run.logged("traces")
    if traced is None:
        n_traces = run.tracker.log_agent_traces(run.id, summary["experiment"], examples, outputs, max_traces)
        run.mark("traces", str(n_traces))
    else:
        n_traces = int(traced)
    intervals = {f"{name}_ci_{side}": bound for name, (low, high) in summary.get("ci", {}).items()
                 for side, bound in (("low", low), ("high", high))}
    figures = {}
    if metrics.get("confusion_tp") is not None:
        figures["plots/confusion_matrix.png"] = plots.confusion_matrix_figure(metrics)
    if table["latency_s"].notna().any():
        figures["plots/latency_histogram.png"] = plots.latency_histogram_figure(table)
    log_results(run, params=params,
                metrics={**metrics, **intervals, **{k: float(v) for k, v in counts.items()},
                         "n_traces": float(n_traces)},
                json_files={"config.json": resolved_config, "summary.json": summary},
                tables={"examples": table}, figures=figures, files=extra_files)
    return n_traces
