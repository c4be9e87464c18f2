"""Sweep tasks: evaluate one configuration as a child run; log the comparison on the parent."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from ragmem import plots
from ragmem.api import run_evaluation
from ragmem.config import RunConfig
from ragmem.loaders import Dataset
from ragmem.sweep import SweepSpec, apply_point, comparison_table, pareto_front
from ragmem.tracking import Tracker


@task(name="evaluate-config", cache_policy=NO_CACHE, task_run_name="child-{index}")
def evaluate_config(base: dict[str, Any], point: dict[str, Any], index: int, run_id: str,
                    dataset: Dataset | None) -> dict[str, Any]:
    """Evaluate one grid point into its (already created) child run; raises when it fails."""
    cfg = RunConfig.from_dict(apply_point(base, point))
    result = run_evaluation(cfg, run_id=run_id, dataset=dataset)
    return {"metrics": {k: v for k, v in result.metrics.items() if v is not None}, "table": result.table}


@task(name="log-sweep", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=1)
def log_sweep(cfg: RunConfig, parent_run_id: str, spec: SweepSpec, children: list[dict[str, Any]],
              best: dict[str, Any] | None, sweep_summary: dict[str, Any]) -> None:
    """Comparison table (CSV + MLflow table), plots and the best configuration on the parent."""
    tracker = Tracker(cfg.tracking_uri, cfg.artifact_root)
    table = comparison_table(children, spec)
    tracker.log_table(parent_run_id, table, "comparison")
    tracker.log_json(parent_run_id, sweep_summary, "sweep.json")
    done = table[table["status"] == "FINISHED"]
    metrics = list(spec.plot_metrics or [])
    if not metrics:
        top_k = max(cfg.ks)
        metrics = [m for m in dict.fromkeys([spec.metric, "reference_coverage", f"hit_rate_at_{top_k}",
                                             f"mrr_at_{top_k}", "avg_latency"]) if m in done]
    for metric in metrics:
        if metric in done and done[metric].notna().any():
            fig = plots.metric_by_setting_figure(done, metric, spec.keys)
            tracker.log_figure(parent_run_id, fig, f"plots/{metric}_by_setting.png")
            plots.close(fig)
    latency = next((m for m in ("latency_p95", "avg_latency") if m in done and done[m].notna().all()), None)
    if latency and spec.metric in done and len(done):
        ok = done[done[spec.metric].notna()]
        lat, quality = ok[latency].tolist(), ok[spec.metric].tolist()
        labels = [",".join(f"{k.rsplit('.', 1)[-1]}={r[k]}" for k in spec.keys) for _, r in ok.iterrows()]
        fig = plots.pareto_figure(lat, quality, labels, pareto_front(list(zip(lat, quality))), spec.metric, latency)
        tracker.log_figure(parent_run_id, fig, "plots/quality_vs_latency.png")
        plots.close(fig)
    parent_metrics: dict[str, float | None] = {"n_children": float(len(children)),
                                               "index_builds": float(sweep_summary.get("index_builds", 0)),
                                               "n_children_failed": float((table["status"] != "FINISHED").sum())}
    if best is not None:
        parent_metrics[f"best_{spec.metric}"] = best["metrics"][spec.metric]
        tracker.set_tags(parent_run_id, {"best_run_id": best["run_id"]})
        tracker.log_params(parent_run_id, {f"best.{k}": v for k, v in best["params"].items()})
    tracker.log_metrics(parent_run_id, parent_metrics)
    tracker.finish(parent_run_id)

