"""MLflow bookkeeping tasks: open the run first (so later steps can attach to it), log at the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from ragmem import pipeline
from ragmem.config import RunConfig
from ragmem.metrics import MetricResult
from ragmem.schema import AgentOutput, Example
from ragmem.tracking import Tracker, record_run


@task(name="start-run", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=1)
def start_run(cfg: RunConfig, tags: dict[str, str]) -> str:
    """Create the MLflow run (status RUNNING) and return its id."""
    return Tracker(cfg.tracking_uri, cfg.artifact_root).start_run(cfg.experiment, cfg.run_name, tags)


@task(name="log-run", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=1)
def log_run(run_id: str, cfg: RunConfig, params: dict[str, str], result: MetricResult,
            table: pd.DataFrame, summary: dict[str, Any], examples: Sequence[Example],
            outputs: Sequence[AgentOutput], journal: Path | None = None) -> None:
    """Agent-call traces, params, metrics, config, summary, per-example table and plots; then
    mark the run finished."""
    tracker = Tracker(cfg.tracking_uri, cfg.artifact_root)
    n_traces = tracker.log_agent_traces(run_id, cfg.experiment, examples, outputs,
                                        int(cfg.raw["tracking"]["max_traces"]))
    extra = [journal] if journal is not None and journal.is_file() else []
    record_run(tracker, run_id, cfg.raw, params, result.values,
               {**pipeline.counts(table, result), "n_traces": n_traces}, table, summary, extra)
    tracker.finish(run_id)


def fail_run(cfg: RunConfig, run_id: str) -> None:
    """Mark a run FAILED (called from the flow when a step raised)."""
    Tracker(cfg.tracking_uri, cfg.artifact_root).finish(run_id, "FAILED")
