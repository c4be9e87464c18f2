"""Comparing runs: a table of the runs of an experiment, and (see ``paired``) two runs example by
example.

Two numbers are comparable only when the settings that produced them match (the sacrebleu
practice): each run logs signatures (``keywords.signature``, ``judge.signature``, ``data.sha256``,
``ranking.k``) and ``compare`` warns when they differ between the runs it shows.
"""

from __future__ import annotations

import json
import re
import tempfile
from typing import Any

import pandas as pd

from ragmem.clients.endpoints import check_store
from ragmem.errors import ConfigError, RagmemError
from ragmem.metrics import expand_selection
from ragmem.metrics._division import parse_zero_division
from ragmem.metrics.generation import scorer_for
from ragmem.metrics.names import DEFAULT_METRICS, FAMILY_NAMES
from ragmem.metrics.ranking import DEFAULT_KS
from ragmem.runtime.processes import run_is_dead
from ragmem.stats.paired_runs import frame_of, paired_rows
from ragmem.tracking import Tracker
from ragmem.tracking.files import ParquetTable
from ragmem.tracking.lifecycle import metric_key, metric_name

SIGNATURE_PARAMS = ("keywords.signature", "judge.signature", "data.sha256", "ranking.k", "zero_division")
DEFAULT_COLUMNS = ("pass_rate", "reference_coverage", "hit_rate_at_10", "ndcg_at_10", "latency_p95")
_VOLATILE = {"data.path", "ragmem.version"}


def lower_is_better(metric: str) -> bool:
    return "latency" in metric or metric.endswith(("_error", "_loss")) or metric.startswith("n_")


def signature_warnings(params: list[dict[str, str]]) -> list[str]:
    warnings = []
    for key in SIGNATURE_PARAMS:
        values = {p.get(key) for p in params if p.get(key) is not None}
        if len(values) > 1:
            warnings.append(f"runs differ in {key} ({len(values)} values): their scores are not directly comparable")
    return warnings


def _is_metric_name(name: str) -> bool:
    at_k = [int(k) for k in re.findall(r"_at_(\d+)$", name)]
    try:
        expand_selection([name], tuple(sorted({*DEFAULT_KS, *at_k})))
    except ConfigError:
        return False
    return True


def latest_experiment(client) -> str:
    """The experiment of the run started last in the store (what a bare ``ragmem compare`` lists)."""
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, order_by=["attributes.start_time DESC"], max_results=1) if experiments else []
    if not runs:
        raise RagmemError("compare: the tracking store has no runs yet (run one first: ragmem run CONFIG)")
    return client.get_experiment(runs[0].info.experiment_id).name


#: the order of the summary, by family: the headline (pass rate, coverage, latency), ranking,
#: generation, the LLM metrics, per source, then the judge (against the labels, its reliability)
_FAMILY_ORDER = ("verdicts", "coverage", "latency", "ranking", "generation", "rag", "rubric", "per_source", "classification",
                 "reliability")


def summary_order(metrics) -> list[str]:
    """``metrics`` in the order the summary shows them (see ``_FAMILY_ORDER``; within a family, as
    the default selection lists them; anything else last, by name).

    >>> summary_order(["f1", "bleu", "ndcg_at_10", "pass_rate", "avg_coverage", "answer_correctness"])
    ['pass_rate', 'avg_coverage', 'ndcg_at_10', 'bleu', 'answer_correctness', 'f1']
    """
    canonical = {name: i for i, name in enumerate(expand_selection(list(DEFAULT_METRICS), DEFAULT_KS))}
    families = {f.family: f for f in FAMILY_NAMES}

    def key(name: str) -> tuple:
        rank = next((i for i, family in enumerate(_FAMILY_ORDER) if families[family].owns(name)), len(_FAMILY_ORDER))
        return rank, canonical.get(name, len(canonical)), name

    return sorted(metrics, key=key)


def list_runs(client, experiment: str, metric: str = "pass_rate", last: int = 20) -> tuple[pd.DataFrame, list[str]]:
    """The last ``last`` runs of an experiment: params that differ between them, the chosen metric
    and a few common ones, sorted by the metric (best first)."""
    found = client.get_experiment_by_name(experiment)
    if found is None:
        names = [e.name for e in client.search_experiments()]
        raise RagmemError(f"--experiment: no experiment named {experiment!r}; "
                          f"experiments: {', '.join(names) or '(none)'}")
    runs = client.search_runs([found.experiment_id], order_by=["attributes.start_time DESC"], max_results=last)
    if not runs:
        raise RagmemError(f"experiment {experiment!r} has no runs")
    logged = sorted({metric_name(k) for r in runs for k in r.data.metrics if not k.endswith(("_ci_low", "_ci_high"))})
    if metric not in logged and not _is_metric_name(metric):
        raise RagmemError(f"--metric {metric!r}: not a metric ragmem computes, and none of the last {len(runs)} "
                          f"runs of {experiment!r} logged it; logged: {', '.join(logged) or '(none)'}")
    params = [r.data.params for r in runs if r.data.params]  # an unfinished run has logged none yet
    keys = sorted({k for p in params for k in p})
    differing = [k for k in keys if k not in _VOLATILE and not k.startswith(("sweep.", "best."))
                 and len({p.get(k) for p in params}) > 1 and k not in SIGNATURE_PARAMS]
    columns = list(dict.fromkeys([metric, *DEFAULT_COLUMNS]))
    rows = []
    for run in runs:
        row: dict[str, Any] = {"run_id": run.info.run_id, "status": run_status(run.info.status, run.data.tags)}
        row.update({k: run.data.params.get(k) for k in differing})
        row.update({m: run.data.metrics.get(metric_key(m)) for m in columns})
        rows.append(row)
    table = pd.DataFrame(rows)
    table = table.sort_values(metric, ascending=lower_is_better(metric), na_position="last", kind="stable")
    table = table.dropna(axis=1, how="all")
    if (table["status"] == "FINISHED").all():
        table = table.drop(columns="status")
    return table.reset_index(drop=True), signature_warnings(params)


def run_status(status: str, tags: dict[str, str]) -> str:
    """MLflow's status, except that a RUNNING run whose process is gone (SIGKILL, power loss) shows
    as ``DEAD`` (resumable with ``--resume``), and one of another host as ``RUNNING?``."""
    if status != "RUNNING" or "ragmem.pid" not in tags:
        return status
    dead = run_is_dead(tags)
    return "DEAD" if dead else "RUNNING" if dead is False else "RUNNING?"


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
    return sorted(metric_name(m) for m in common if not m.endswith(("_ci_low", "_ci_high"))
                  and not m.startswith(("confusion_", "n_", "undefined_", "count/", "usage/")))


#: what compare shows of each run's judge besides the paired rows (pass_rate_ppi is not paired: its
#: interval is each run's own)
_JUDGE_FIGURES = ("pass_rate_ppi", "n_labelled", "judge_label_kappa", "judge_flip_rate")


def judge_of(run) -> dict[str, Any]:
    """One run's judge as compare shows it: the figures above (with their intervals) and whether it
    was flagged unreliable (the tag ``ragmem.judge.unreliable``)."""
    logged = run.data.metrics
    out: dict[str, Any] = {"unreliable": run.data.tags.get("ragmem.judge.unreliable") == "true"}
    for name in _JUDGE_FIGURES:
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


def paired_comparison(client, run_a: str, run_b: str, metrics: list[str] | None = None,
                      resamples: int = 1000, seed: int = 0, confidence: float = 0.95) -> dict[str, Any]:
    """Every metric both runs logged and the per-example tables support, compared on the examples
    the two runs share (matched by example id): ``B - A``, its interval and p-value. Run ids may be
    unique prefixes; a metric neither run logged is refused with the list of known ones."""
    run_a, run_b = resolve_run_id(client, run_a), resolve_run_id(client, run_b)
    known = known_metrics(client, [run_a, run_b])
    unknown = [m for m in metrics or [] if m not in known]
    if unknown:
        raise RagmemError(f"--metrics {unknown[0]!r}: not logged by both runs; known: {', '.join(known)}")
    return compare_tables(run_table(client, run_a), run_table(client, run_b), summary_order(metrics or known),
                          resamples, seed, confidence)


def compare_tables(a: Any, b: Any, names: list[str], resamples: int = 1000, seed: int = 0,
                   confidence: float = 0.95) -> dict[str, Any]:
    """:func:`paired_comparison` of two per-example tables already found (:func:`run_table`, read
    chunk by chunk, or frames)."""
    run_a_info, run_b_info = a.attrs["run"], b.attrs["run"]
    run_a, run_b = run_a_info.info.run_id, run_b_info.info.run_id
    settings_a, settings_b = run_a_info.data.params, run_b_info.data.params
    rows, n_shared = paired_rows(a, b, names, *scoring_of(settings_a), resamples, seed, confidence)
    if not n_shared:
        raise RagmemError(f"runs {run_a} and {run_b} share no example ids: nothing to compare")
    warnings = signature_warnings([settings_a, settings_b])
    if n_shared < max(len(a), len(b)):
        warnings.append(f"compared on the {n_shared} examples the runs share")
    differing = {k: [settings_a.get(k), settings_b.get(k)] for k in sorted(set(settings_a) | set(settings_b))
                 if settings_a.get(k) != settings_b.get(k) and k not in _VOLATILE}
    return {"run_a": run_a, "run_b": run_b, "n_shared": n_shared, "resamples": resamples, "seed": seed,
            "confidence": confidence, "test": "paired bootstrap CI; approximate randomization p-value (two-sided)",
            "settings_that_differ": differing, "warnings": warnings, "metrics": rows,
            "judge": {"a": judge_of(run_a_info), "b": judge_of(run_b_info)}}


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
