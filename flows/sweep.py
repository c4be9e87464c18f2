"""The sweep flow: one parent MLflow run, one child run per configuration, evaluated in parallel."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from prefect import flow
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.utilities.annotations import quote

from ragmem.config import RunConfig
from ragmem.reference.retrievers import INDEX_BUILDS
from ragmem.sweep import apply_point, child_name, expand, parse_sweep, pick_best
from ragmem.tracking import Tracker
from tasks.load import load_examples
from tasks.sweep import evaluate_config, log_sweep

log = logging.getLogger("ragmem")


def _run_name(parameters: dict[str, Any]) -> str:
    config = parameters["config"]
    return config.get("run_name") or f"sweep-{config.get('experiment', 'ragmem')}-{uuid.uuid4().hex[:6]}"


@flow(name="ragmem-sweep", flow_run_name=lambda: _run_name(flow_run.parameters), validate_parameters=False,
      task_runner=ThreadPoolTaskRunner(max_workers=2))
def sweep_flow(config: dict[str, Any]) -> dict[str, Any]:
    """Evaluate every configuration of the sweep grid and pick the best one."""
    spec = parse_sweep(config.get("sweep"))
    base = {k: v for k, v in config.items() if k != "sweep"}
    cfg = RunConfig.from_dict(base)
    points = expand(spec, cfg.seed)
    # data loaded once unless the grid changes the data itself
    dataset = None if any(k.startswith("data.") for k in spec.keys) else load_examples(cfg)

    tracker = Tracker(cfg.tracking_uri, cfg.artifact_root)
    parent = tracker.start_run(cfg.experiment, cfg.run_name or f"sweep-{uuid.uuid4().hex[:6]}",
                               tags={"ragmem.entry": "sweep", "prefect.flow_run_id": str(flow_run.id)})
    tracker.log_params(parent, {"sweep.grid": spec.grid, "sweep.samples": spec.samples,
                                "sweep.objective": f"{spec.goal} {spec.metric}",
                                "sweep.constraints": list(spec.constraints), "n_children": len(points),
                                "data.sha256": dataset.sha256 if dataset else "varies"})
    child_ids = [tracker.start_run(cfg.experiment, child_name(p), parent_run_id=parent,
                                   tags={"ragmem.entry": "sweep-child"}) for p in points]
    log.info("sweep: %d configurations, %d at a time", len(points), spec.max_parallel)

    builds_before = INDEX_BUILDS["count"]
    futures = [evaluate_config.submit(base, point, i, child_ids[i], quote(dataset))
               for i, point in enumerate(points)]
    children, tables = [], {}
    for i, (point, future) in enumerate(zip(points, futures)):
        future.wait()
        state = future.state
        child = {"run_id": child_ids[i], "params": point, "metrics": {}, "status": "FINISHED", "error": None}
        if state.is_completed():
            outcome = future.result()
            child["metrics"] = outcome["metrics"]
            tables[i] = outcome["table"]
        else:
            child["status"] = "FAILED"
            child["error"] = _failure_message(state)
            tracker.set_tags(child_ids[i], {"ragmem.error": child["error"][:5000]})
            tracker.finish(child_ids[i], "FAILED")
        children.append(child)
        value = child["metrics"].get(spec.metric)
        outcome = child["error"] or (f"{spec.metric}={value:.4f}" if value is not None else f"{spec.metric}=n/a")
        log.info("sweep: %d/%d %s -> %s", i + 1, len(points), child_name(point), outcome)

    index_builds = INDEX_BUILDS["count"] - builds_before
    best = pick_best(children, spec)
    if best is not None:
        mark_against_best(children, tables, children.index(best), spec, cfg)
    summary = {"parent_run_id": parent, "experiment": cfg.experiment,
               "objective": {"metric": spec.metric, "goal": spec.goal, "constraints": list(spec.constraints)},
               "index_builds": index_builds,
               "children": children,
               "best": None if best is None else {"run_id": best["run_id"], "params": best["params"],
                                                  "metrics": best["metrics"],
                                                  "config": apply_point(base, best["params"])}}
    log_sweep(cfg, parent, spec, children, best, summary)
    return summary


def mark_against_best(children: list[dict[str, Any]], tables: dict, best: int, spec, cfg: RunConfig) -> None:
    """Each finished child's objective against the best child's, on the same examples: difference,
    paired-bootstrap interval, randomization p-value, and whether it is significantly worse."""
    from ragmem import stats

    resamples = int(cfg.raw["stats"]["resamples"])
    best_table = tables[best].set_index("id")
    for i, child in enumerate(children):
        if i not in tables:
            continue
        if i == best:
            child["vs_best"] = {"diff": 0.0, "ci_low": 0.0, "ci_high": 0.0, "p_value": 1.0,
                                "significantly_worse": False, "is_best": True}
            continue
        shared = [x for x in tables[i]["id"] if x in best_table.index]
        a = stats.aggregators(best_table.loc[shared].reset_index(), [spec.metric], cfg.zero_division)
        b = stats.aggregators(tables[i].set_index("id").loc[shared].reset_index(), [spec.metric], cfg.zero_division)
        if spec.metric not in a or spec.metric not in b:
            continue
        result = stats.paired(spec.metric, a[spec.metric], b[spec.metric], resamples, cfg.seed).to_dict()
        worse = result["diff"] is not None and (result["diff"] < 0 if spec.goal == "maximize" else result["diff"] > 0)
        child["vs_best"] = {k: result[k] for k in ("diff", "ci_low", "ci_high", "p_value")} | {
            "significantly_worse": bool(worse and result["p_value"] is not None and result["p_value"] < 0.05),
            "is_best": False}


def _failure_message(state) -> str:
    try:
        state.result()
    except Exception as exc:  # the child's own exception, recorded as its reason
        return f"{type(exc).__name__}: {exc}".splitlines()[0]
    return str(state.message or state.type)


def run_sweep(config: dict[str, Any]) -> dict[str, Any]:
    """Run the sweep flow with ``sweep.max_parallel`` children at a time."""
    spec = parse_sweep(config.get("sweep"))
    runner = ThreadPoolTaskRunner(max_workers=spec.max_parallel)
    return sweep_flow.with_options(task_runner=runner)(config)
