"""Runs read back from the tracking store: a run's id from a prefix, its artifacts, its summary, its
per-example table (whole, or to be read chunk by chunk), the metrics it logged, its judge's figures,
its scoring settings, a benchmark's rows and a gate's baseline. What compares them is
:mod:`ragmem.tracking.compare`.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

import pandas as pd

from ragmem.clients.endpoints import check_store
from ragmem.errors import ConfigError, RagmemError
from ragmem.metrics import catalogue
from ragmem.metrics._division import parse_zero_division
from ragmem.metrics.generation import scorer_for
from ragmem.runtime.processes import run_is_dead
from ragmem.stats.paired_runs import frame_of
from ragmem.tracking import Tracker
from ragmem.tracking.files import ParquetTable
from ragmem.tracking.lifecycle import metric_key, metric_name

def run_status(status: str, tags: dict[str, str]) -> str:
    """MLflow's status, except that a RUNNING run whose process is gone (SIGKILL, power loss) shows
    as ``DEAD`` (resumable with ``--resume``), and one of another host as ``RUNNING?``."""
    if status != "RUNNING" or "ragmem.pid" not in tags:
        return status
    dead = run_is_dead(tags)
    return "DEAD" if dead else "RUNNING" if dead is False else "RUNNING?"


def latest_run(client):
    """The run started last in the store (any experiment), or ``None`` when it holds none."""
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, order_by=["attributes.start_time DESC"], max_results=1) if experiments else []
    return runs[0] if runs else None


def resolve_run_id(client, ref: str, what: str = "run") -> str:
    """A full run id, or a unique prefix of one (the 8 characters the tables show)."""
    ref = ref.strip()
    if len(ref) == 32:
        return ref
    if len(ref) < 4 or any(c not in "0123456789abcdef" for c in ref.lower()):
        raise RagmemError(f"{what} {ref!r}: expected a run id or a prefix of at least 4 hex characters")
    experiments = [e.experiment_id for e in client.search_experiments()]
    matches = [r.info.run_id for r in client.search_runs(
        experiments, filter_string=f"attributes.run_id LIKE '{ref.lower()}%'", max_results=3)] if experiments else []
    if not matches:
        raise RagmemError(f"{what} {ref!r}: no run id starts with it in the tracking store")
    if len(matches) > 1:
        raise RagmemError(f"{what} {ref!r}: more than one run id starts with it ({', '.join(matches[:3])}); "
                          "give more characters")
    return matches[0]


def artifact_json(client, run_id: str, name: str) -> Any:
    """The JSON artifact ``name`` of a run, read (what a missing one raises is the caller's to word)."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(client.download_artifacts(run_id, name, tmp), encoding="utf-8") as handle:
            return json.load(handle)


def run_summary(client, run_id: str) -> dict[str, Any]:
    """The ``summary.json`` a run logged."""
    try:
        return artifact_json(client, run_id, "summary.json")
    except Exception:
        raise RagmemError(f"run {run_id} has no summary.json artifact (was it logged by ragmem run?)") from None


class RunRef:
    """A table's MLflow run in ``DataFrame.attrs["run"]``, held by reference: pandas deep-copies a
    frame's ``attrs`` on nearly every operation (a column read, ``copy``, ``align``), and a run's
    params, metrics and tags are hundreds of objects: 31 s of the fast lane's 250 went to copying
    them. Reads as the run itself (``.info``, ``.data``)."""

    def __init__(self, run):
        self.run = run

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "run":  # (pickling, copying: the object's own)
            raise AttributeError(name)
        return getattr(self.run, name)

    def __deepcopy__(self, memo) -> RunRef:
        return self


def load_run_table(client, run_id: str) -> pd.DataFrame:
    """The per-example table a run logged, whole: ``examples.parquet``, or ``examples.json`` for a
    run logged before the Parquet file (both read back as the same frame); ``run_id`` may be a
    unique prefix; ``attrs["run"]``: the MLflow run."""
    return frame_of(run_table(client, run_id))


def run_table(client, run_id: str) -> pd.DataFrame | ParquetTable:
    """The per-example table a run logged, to be read chunk by chunk (:mod:`ragmem.stats.paired_runs`): its
    ``examples.parquet`` downloaded to a temporary folder that lives as long as the table, or (a
    run logged before the Parquet file) its ``examples.json`` as a frame; ``attrs["run"]``: the
    MLflow run. ``run_id`` may be a unique prefix."""
    run_id = resolve_run_id(client, run_id)
    try:
        run = client.get_run(run_id)
    except Exception:
        raise RagmemError(f"run {run_id!r} not found in the tracking store") from None
    try:
        logged = {entry.path for entry in client.list_artifacts(run_id)}
        if "examples.parquet" in logged:
            folder = tempfile.TemporaryDirectory(prefix="ragmem-compare-")
            path = client.download_artifacts(run_id, "examples.parquet", folder.name)
            return ParquetTable(path, built=False, keep=folder, attrs={"run": RunRef(run)})
        payload = artifact_json(client, run_id, "examples.json")
        table = pd.DataFrame(payload["data"], columns=payload["columns"])
    except Exception:
        raise RagmemError(f"run {run_id} has no examples.parquet or examples.json artifact "
                          f"(was it logged by ragmem run?)") from None
    table.attrs["run"] = RunRef(run)
    return table


def known_metrics(client, run_ids: list[str]) -> list[str]:
    """The metrics every one of the runs logged (intervals and counts left out)."""
    logged = [set(client.get_run(r).data.metrics) for r in run_ids]
    common = set.intersection(*logged) if logged else set()
    return sorted(metric_name(m) for m in common if not m.startswith(("count/", "usage/")) and catalogue.reported(m))


def judge_of(run) -> dict[str, Any]:
    """One run's judge as compare shows it: the figures above (with their intervals) and whether it
    was flagged unreliable (the tag ``ragmem.judge.unreliable``)."""
    logged = run.data.metrics
    out: dict[str, Any] = {"unreliable": run.data.tags.get("ragmem.judge.unreliable") == "true"}
    for name in catalogue.JUDGE_FIGURES:
        key = metric_key(name)
        if key in logged:
            out[name] = logged[key]
            if f"{key}_ci_low" in logged:
                out[f"{name}_ci"] = [logged[f"{key}_ci_low"], logged[f"{key}_ci_high"]]
    return out


def scoring_of(params: dict[str, str]) -> tuple[float, Any]:
    """A run's ``zero_division`` and generation scorer, as its params logged them (the scorer is
    ``None`` for a run logged without its tokenizer settings: its corpus BLEU/chrF cannot be rebuilt)."""
    scorer = None
    if "generation.tokenizer" in params and "generation.bleu_tokenize" in params:
        scorer = scorer_for(params["generation.tokenizer"], params["generation.bleu_tokenize"])
    return parse_zero_division(params.get("zero_division", "0")), scorer


def latest_pairwise(client, run_a: str, run_b: str) -> dict[str, Any] | None:
    """The latest finished pairwise comparison of B against A (``ragmem compare A B --judge
    pairwise``, :func:`ragmem.tracking.record_pairwise`) as it was logged, or ``None``."""
    experiments = [e.experiment_id for e in client.search_experiments()]
    found = client.search_runs(experiments, filter_string=f"tags.`ragmem.judges.pairwise.run_a` = '{run_a}' and "
                                                          f"tags.`ragmem.judges.pairwise.run_b` = '{run_b}' and "
                                                          "attributes.status = 'FINISHED'",
                               order_by=["attributes.start_time DESC"], max_results=1) if experiments else []
    if not found:
        return None
    return {**artifact_json(client, found[0].info.run_id, "pairwise.json"), "pairwise_run_id": found[0].info.run_id}


def bench_rows(client, parent_id: str) -> dict[str, list[dict[str, Any]]]:
    """A memory benchmark's per-question rows, by method, read back from its method runs (the
    ``questions`` table each logged); a method that logged none is left out."""
    parent = client.get_run(parent_id)
    runs = client.search_runs([parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'")
    out = {}
    for run in sorted(runs, key=lambda r: r.info.start_time):
        try:
            payload = artifact_json(client, run.info.run_id, "questions.json")
        except Exception:  # a method that failed before it scored anything
            continue
        out[run.data.tags.get("bench.method", run.info.run_name)] = [dict(zip(payload["columns"], row))
                                                                     for row in payload["data"]]
    return out


def read_baseline(tracking_uri: str, run_ref: str) -> pd.DataFrame | ParquetTable:
    """The per-example table of a gate's baseline run (:func:`run_table`: ``attrs["run"]``, the
    MLflow run), by id or unique prefix: found (and downloaded) by
    :func:`ragmem.run.prepare.read_baseline` before any work, handed to
    :func:`ragmem.run.gates.regressions` after the run. A tracking server that does not answer is one
    line (exit 2); a run that is not there, or has no table, a ConfigError."""
    check_store(tracking_uri)
    try:
        return run_table(Tracker(tracking_uri).client, run_ref)
    except RagmemError as exc:
        raise ConfigError(f"baseline: {exc}") from None
