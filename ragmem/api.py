"""The Python API for notebooks and pytest: the same steps as the Prefect flow, without Prefect.

>>> import ragmem
>>> result = ragmem.evaluate("data.json", track=False, judge={"threshold": 0.6})  # doctest: +SKIP
>>> result.metrics["f1"], result.table[["id", "verdict"]]                       # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ragmem import pipeline
from ragmem.config import RunConfig, resolve_config
from ragmem.loaders import Dataset


@dataclass
class EvaluationResult:
    """Aggregates in ``metrics``, one row per example in ``table``, and the summary dict."""

    metrics: dict[str, float | None]
    table: pd.DataFrame
    summary: dict[str, Any]
    run_id: str | None = None
    params: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v:.4g}" for k, v in self.metrics.items()
                          if v is not None and not k.startswith("confusion_"))
        return f"EvaluationResult(n={len(self.table)}, run_id={self.run_id!r}, {shown})"


def evaluate(data: str | Path | list[dict[str, Any]] | None = None, config: str | Path | dict | None = None,
             *, track: bool = True, **overrides: Any) -> EvaluationResult:
    """Evaluate a dataset and (unless ``track=False``) record the run in MLflow.

    ``data`` is a dataset file, or a list of ``{path, label?}`` entries; ``config`` a YAML file or a
    dict of settings; keyword arguments override top-level settings (``judge={"threshold": 0.5}``,
    ``metrics=["f1"]``, ``experiment="nightly"``).
    """
    extra = dict(overrides)
    if isinstance(config, dict):
        extra = {**config, **extra}
        config = None
    data_path = None
    if isinstance(data, list):
        extra.setdefault("data", {})["files"] = data
    elif data is not None:
        data_path = str(data)
    cfg = RunConfig.from_dict(resolve_config(config, data=data_path, extra=extra))
    return run_evaluation(cfg, track=track and cfg.tracking_enabled)


def run_evaluation(cfg: RunConfig, track: bool = True, *, parent_run_id: str | None = None,
                   dataset: Dataset | None = None, run_name: str | None = None,
                   tags: dict[str, str] | None = None, run_id: str | None = None) -> EvaluationResult:
    """load -> time the agent -> judge -> metrics -> log, as plain function calls.

    The MLflow run is opened first, so a configuration that fails (a sweep child with a bad
    setting, an agent that cannot be built) is recorded as a FAILED run. ``dataset`` reuses data
    loaded once (sweeps); ``parent_run_id`` nests the run under a parent; ``run_id`` logs into a run
    created beforehand (a sweep creates its children's runs up front).
    """
    tracker = None
    if track or run_id is not None:
        from ragmem.tracking import Tracker

        tracker = Tracker(cfg.tracking_uri, cfg.artifact_root)
        run_id = run_id or tracker.start_run(cfg.experiment, run_name or cfg.run_name,
                                   tags={"ragmem.entry": "python-api", **(tags or {})}, parent_run_id=parent_run_id)
    try:
        components = pipeline.build_components(cfg)
        dataset = dataset if dataset is not None else pipeline.load(cfg)
        outputs = pipeline.time_agent(components.agent, dataset.examples, cfg)
        judgements = pipeline.judge(components.judge, dataset.examples, outputs)
        table = pipeline.build_table(dataset.examples, outputs, judgements, components.keywords)
        table, result = pipeline.score(table, cfg, components)
        params = pipeline.run_params(cfg, dataset, components)
        summary = pipeline.summary(run_id, cfg, result, table, params)
        if tracker is not None:
            from ragmem.tracking import record_run

            n_traces = tracker.log_agent_traces(run_id, cfg.experiment, dataset.examples, outputs,
                                                int(cfg.raw["tracking"]["max_traces"]))
            record_run(tracker, run_id, cfg.raw, params, result.values,
                       {**pipeline.counts(table, result), "n_traces": n_traces}, table, summary)
    except BaseException as exc:
        if tracker is not None:
            tracker.set_tags(run_id, {"ragmem.error": f"{type(exc).__name__}: {exc}"[:5000]})
            tracker.finish(run_id, "FAILED")
        raise
    if tracker is not None:
        tracker.finish(run_id)
    return EvaluationResult(result.values, table, summary, run_id, params)
