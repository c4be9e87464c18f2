"""Every MLflow call ragmem makes lives here.

The client is always given run ids explicitly (``MlflowClient``): MLflow's active run is per thread,
and Prefect runs tasks on worker threads, where ``mlflow.log_metric`` would silently open an orphan
run. Default store: ``sqlite:///mlruns/mlflow.db`` (MLflow 3 refuses a bare ``./mlruns`` file store)
with artifacts under ``mlruns/artifacts/<experiment>``, passed explicitly at experiment creation
(MLflow otherwise stores the working directory of whoever created the experiment).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

# a download progress bar per artifact is noise in a terminal table (users may set it back)
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
# MLflow announces creating and migrating its sqlite tables at INFO on first use; not news to users.
for _name in ("mlflow.store.db.utils", "alembic", "mlflow.tracing.export.async_export_queue"):
    logging.getLogger(_name).setLevel(logging.WARNING)

_PARAM_LIMIT = 6000  # MLflow's limit for a param value


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "experiment"


def _prepare_local_store(uri: str) -> None:
    """Create the folder of a relative or absolute sqlite file so MLflow can open it."""
    if uri.startswith("sqlite:///"):
        Path(uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)


class Tracker:
    """A thin, explicit-run-id wrapper over ``MlflowClient``."""

    def __init__(self, uri: str, artifact_root: str = "mlruns/artifacts"):
        from mlflow import MlflowClient

        import mlflow

        _prepare_local_store(uri)
        # MLflow exports traces to the *global* tracking URI, whatever client started them, so the
        # process-wide URI is set too (a process tracks to one store at a time here). set_tracking_uri
        # also writes MLFLOW_TRACKING_URI into os.environ; that would leak into the next run's default
        # and into subprocesses, so the variable is put back as it was.
        previous = os.environ.get("MLFLOW_TRACKING_URI")
        mlflow.set_tracking_uri(uri)
        if previous is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = previous
        self.uri = uri
        self.artifact_root = artifact_root
        self.client = MlflowClient(tracking_uri=uri)

    def experiment_id(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            if found.lifecycle_stage == "deleted":
                self.client.restore_experiment(found.experiment_id)
            return found.experiment_id
        location = None
        if not re.match(r"^[a-z][a-z0-9+.-]*://", self.artifact_root):
            location = (Path(self.artifact_root).resolve() / _slug(name)).as_uri()
        else:
            location = f"{self.artifact_root.rstrip('/')}/{_slug(name)}"
        try:
            return self.client.create_experiment(name, artifact_location=location)
        except Exception:  # created concurrently by another process: use theirs
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id

    def start_run(self, experiment: str, run_name: str | None = None, tags: dict[str, str] | None = None,
                  parent_run_id: str | None = None) -> str:
        tags = dict(tags or {})
        if parent_run_id:
            tags["mlflow.parentRunId"] = parent_run_id
        run = self.client.create_run(self.experiment_id(experiment), run_name=run_name, tags=tags)
        return run.info.run_id

    def log_params(self, run_id: str, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        items = []
        for key, value in params.items():
            text = str(value)
            if len(text) > _PARAM_LIMIT:
                text = text[: _PARAM_LIMIT - 20] + "...(truncated)"
            items.append(Param(key, text))
        for start in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[start:start + 100])

    def log_metrics(self, run_id: str, metrics: dict[str, float | None], step: int = 0) -> None:
        """Log the defined metrics; ``None``/NaN (not measured, undefined) are not logged as numbers."""
        from mlflow.entities import Metric
        import time

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, step) for k, v in metrics.items()
                 if v is not None and not (isinstance(v, float) and math.isnan(v))]
        for start in range(0, len(items), 500):
            self.client.log_batch(run_id, metrics=items[start:start + 500])

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            self.client.set_tag(run_id, key, value)

    def log_json(self, run_id: str, payload: Any, artifact_file: str) -> None:
        self.client.log_dict(run_id, payload, artifact_file)

    def log_text(self, run_id: str, text: str, artifact_file: str) -> None:
        self.client.log_text(run_id, text, artifact_file)

    def log_table(self, run_id: str, table: pd.DataFrame, name: str) -> None:
        """The table twice: ``<name>.csv`` for spreadsheets and ``<name>.json`` as an MLflow table
        (shown in the UI's Evaluation/Artifacts view)."""
        flat = table.copy()
        for column in flat.columns:
            if flat[column].map(lambda v: isinstance(v, (list, dict))).any():
                flat[column] = flat[column].map(lambda v: json.dumps(v, ensure_ascii=False))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{name}.csv"
            flat.to_csv(path, index=False)
            self.client.log_artifact(run_id, str(path))
        self.client.log_table(run_id, data=flat.astype(object).where(flat.notna(), None), artifact_file=f"{name}.json")

    def log_file(self, run_id: str, path: str | Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(run_id, str(path), artifact_path)

    def log_figure(self, run_id: str, figure: Any, artifact_file: str) -> None:
        self.client.log_figure(run_id, figure, artifact_file)

    def log_agent_traces(self, run_id: str, experiment: str, examples, outputs, limit: int) -> int:
        """One MLflow trace per timed agent call, with a span per reported stage, so a slow or wrong
        answer can be opened in the UI. Writing a trace to sqlite costs ~60 ms (measured), so at most
        ``limit`` calls are traced: failed calls first, then the slowest. Returns how many."""
        import mlflow

        timed = [(ex, out) for ex, out in zip(examples, outputs) if out.started_at_ns is not None]
        timed.sort(key=lambda pair: (pair[1].error is None, -(pair[1].latency_s or 0.0)))
        experiment_id = self.experiment_id(experiment)
        for ex, out in timed[:limit]:
            start = out.started_at_ns
            end = start + int((out.latency_s or 0.0) * 1e9)
            root = self.client.start_trace(
                "agent", span_type="AGENT", inputs={"query": ex.query, "session_id": ex.session_id},
                experiment_id=experiment_id, start_time_ns=start, run_id=run_id,
                tags={"ragmem.example_id": ex.id}, attributes={"attempts": str(out.attempts)})
            cursor = start
            for stage, seconds in out.timings_s.items():
                kind = {"retrieve": "RETRIEVER", "llm": "LLM", "embed": "EMBEDDING", "rerank": "RERANKER"}.get(stage, "UNKNOWN")
                span = self.client.start_span(stage, trace_id=root.trace_id, parent_id=root.span_id,
                                              span_type=kind, start_time_ns=cursor)
                cursor = min(end, cursor + int(seconds * 1e9))
                outputs = [c.to_dict() for c in out.contexts if stage == "retrieve" and c.source == "rag"] or None
                self.client.end_span(root.trace_id, span.span_id, outputs=outputs, end_time_ns=cursor)
            self.client.end_trace(root.trace_id, outputs={"answer": out.answer, "n_contexts": len(out.contexts),
                                                          "error": out.error},
                                  status="ERROR" if out.error else "OK", end_time_ns=end)
        if timed[:limit]:
            mlflow.flush_trace_async_logging()
        return min(limit, len(timed))

    def finish(self, run_id: str, status: str = "FINISHED") -> None:
        self.client.set_terminated(run_id, status=status)


def record_run(tracker: Tracker, run_id: str, resolved_config: dict[str, Any], params: dict[str, str],
               metrics: dict[str, float | None], counts: dict[str, int], table: pd.DataFrame,
               summary: dict[str, Any], extra_files: list[Path] | None = None) -> None:
    """Log one evaluation run: params, metrics (+ counts and ``{metric}_ci_low/high``), the resolved
    config, ``summary.json``, the per-example table (CSV + MLflow table) and the plots."""
    from ragmem import plots

    intervals = {f"{name}_ci_{side}": bound for name, (low, high) in summary.get("ci", {}).items()
                 for side, bound in (("low", low), ("high", high))}
    tracker.log_params(run_id, params)
    tracker.log_metrics(run_id, {**metrics, **intervals, **{k: float(v) for k, v in counts.items()}})
    tracker.log_json(run_id, resolved_config, "config.json")
    tracker.log_json(run_id, summary, "summary.json")
    tracker.log_table(run_id, table, "examples")
    if metrics.get("confusion_tp") is not None:
        fig = plots.confusion_matrix_figure(metrics)
        tracker.log_figure(run_id, fig, "plots/confusion_matrix.png")
        plots.close(fig)
    if table["latency_s"].notna().any():
        fig = plots.latency_histogram_figure(table)
        tracker.log_figure(run_id, fig, "plots/latency_histogram.png")
        plots.close(fig)
    for path in extra_files or []:
        tracker.log_file(run_id, path)
