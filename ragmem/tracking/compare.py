"""Comparing runs: a table of the runs of an experiment (:func:`list_runs`), and two runs example by
example on the examples they share (:func:`paired_comparison`, :func:`compare_tables`; the
statistics are :mod:`ragmem.stats.paired_runs`').

Two numbers are comparable only when the settings that produced them match (the sacrebleu
practice): each run logs signatures (``keywords.signature``, ``judge.signature``, ``data.sha256``,
``ranking.k``) and ``compare`` warns when they differ between the runs it shows.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ragmem.errors import RagmemError
from ragmem.metrics import scored
from ragmem.config.settings import run_setting
from ragmem.metrics import catalogue
from ragmem.metrics.catalogue import lower_is_better, summary_order  # noqa: F401  (read from here too)
from ragmem.stats.multiplicity import holm, min_detectable, permutations_for
from ragmem.stats.paired_runs import chunks_of, paired_rows
from ragmem.tracking.lifecycle import metric_key, metric_name
from ragmem.text import plural
from ragmem.tracking.runs import (artifact_json, judge_of, known_metrics, latest_run, resolve_run_id, run_status,
                                  run_table, scoring_of)

SIGNATURE_PARAMS = ("keywords.signature", "judge.signature", "data.sha256", "ranking.k", "zero_division")


_VOLATILE = {"data.path", "ragmem.version"}


def _is_metric_name(name: str) -> bool:
    return catalogue.family_of(name) not in (None, "count")


def latest_experiment(client) -> str:
    """The experiment of the run started last in the store (what a bare ``ragmem compare`` lists)."""
    run = latest_run(client)
    if run is None:
        raise RagmemError("compare: the tracking store has no runs yet (run one first: ragmem run CONFIG)")
    return client.get_experiment(run.info.experiment_id).name


def signature_warnings(params: list[dict[str, str]]) -> list[str]:
    warnings = []
    for key in SIGNATURE_PARAMS:
        values = {p.get(key) for p in params if p.get(key) is not None}
        if len(values) > 1:
            warnings.append(f"runs differ in {key} ({len(values)} values): their scores are not directly comparable")
    return warnings


#: how many runs of an experiment a listing reads (the rows shown are the latest ``--last`` of them;
#: the others are counted)
READ_AT_MOST = 1000


def list_runs(client, experiment: str, metric: str | None = None, last: int = 20) -> tuple[pd.DataFrame, list[str], list[str]]:
    """The last ``last`` runs of an experiment (parents of other runs left out: a sweep's parent has
    none of its children's settings nor metrics): the params that differ between them, the chosen
    metric and a few common ones (those whose values differ first), sorted by the metric (best
    first; ``None``: :func:`ragmem.metrics.catalogue.sorted_by` of what they logged); and what a reader
    must know (parents left out, older runs not shown)."""
    found = client.get_experiment_by_name(experiment)
    if found is None:
        names = [e.name for e in client.search_experiments()]
        raise RagmemError(f"--experiment: no experiment named {experiment!r}; "
                          f"experiments: {', '.join(names) or '(none)'}")
    every = client.search_runs([found.experiment_id], order_by=["attributes.start_time DESC"], max_results=READ_AT_MOST)
    if not every:
        raise RagmemError(f"experiment {experiment!r} has no runs")
    parents = {r.data.tags.get("mlflow.parentRunId") for r in every} - {None}
    listed = [r for r in every if r.info.run_id not in parents]
    notes = []
    if parents:
        shown = sorted(p[:8] for p in parents)
        notes.append(f"{plural(len(parents), 'parent run')} left out ({', '.join(shown[:3])}"
                     f"{', ...' if len(parents) > 3 else ''}): their children are the rows; a sweep's ranking: "
                     f"ragmem compare --sweep {shown[0] if len(shown) == 1 else 'PARENT'}")
    if len(listed) > last:
        more = len(listed) - last
        notes.append(f"{plural(more, 'older run')} not shown{'+' if len(every) == READ_AT_MOST else ''} "
                     f"(-n {min(len(listed), READ_AT_MOST)} lists them)")
    if metric is None:  # the first headline metric the runs have (traffic without references: no pass_rate)
        metric = catalogue.sorted_by(metric_name(k) for r in listed[:last] for k in r.data.metrics)
    table, warnings = _runs_table(listed[:last], metric, experiment)
    table.attrs["sorted_by"] = metric
    return table, warnings, notes


def sweep_children(client, parent: str, last: int = 100) -> tuple[pd.DataFrame, list[str], list[str], dict[str, Any]]:
    """The children of the sweep ``parent`` (a run id or a unique prefix) ranked by the sweep's own
    decision (its ``sweep.json``): the chosen configuration first, then those tied with it (not
    significantly worse on the same examples), then the others, each group by the objective; a
    column ``decision`` says which. Also the sweep's objective."""
    parent = resolve_run_id(client, parent, "--sweep")
    try:
        decided = artifact_json(client, parent, "sweep.json")
    except Exception:  # noqa: BLE001  (any store's way of saying the artifact is not there)
        raise RagmemError(f"--sweep {parent[:8]}: not a sweep's parent run (it logged no sweep.json)") from None
    objective = decided["objective"]
    runs = client.search_runs([client.get_run(parent).info.experiment_id],
                              filter_string=f"tags.mlflow.parentRunId = '{parent}'", max_results=READ_AT_MOST)
    if not runs:
        raise RagmemError(f"--sweep {parent[:8]}: the sweep has no child runs")
    table, warnings = _runs_table(runs, objective["metric"], decided.get("experiment") or "",
                                  minimize=objective.get("goal") == "minimize")
    chosen = (decided.get("best") or {}).get("run_id")
    tied = set(decided.get("tied_for_best") or ())
    table.insert(1, "decision", ["chosen" if r == chosen else "tied" if r in tied else "" for r in table["run_id"]])
    rank = table["decision"].map({"chosen": 0, "tied": 1}).fillna(2)
    table = table.iloc[rank.argsort(kind="stable")].reset_index(drop=True)
    notes = [f"ranked as the sweep decided: chosen, then tied with it ({len(tied)} tied for best), then the rest; "
             f"each by {objective['metric']} ({objective.get('goal', 'maximize')})"]
    if len(table) > last:
        notes.append(f"{plural(len(table) - last, 'more child')} not shown (-n {len(table)} lists them)")
    return table.head(last), warnings, notes, objective


def _runs_table(runs: list, metric: str, experiment: str, minimize: bool | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The rows of ``runs``: the params that differ, ``metric`` and the common metrics (those that
    differ between the rows first), sorted by ``metric`` best first."""
    logged = sorted({metric_name(k) for r in runs for k in r.data.metrics if not k.endswith(("_ci_low", "_ci_high"))})
    if metric not in logged and not _is_metric_name(metric):
        raise RagmemError(f"--metric {metric!r}: not a metric ragmem computes, and none of the last {len(runs)} "
                          f"runs of {experiment!r} logged it; logged: {', '.join(logged) or '(none)'}")
    params = [r.data.params for r in runs if r.data.params]  # an unfinished run has logged none yet
    keys = sorted({k for p in params for k in p})
    differing = [k for k in keys if k not in _VOLATILE and not k.startswith(("sweep.", "best."))
                 and len({p.get(k) for p in params}) > 1 and k not in SIGNATURE_PARAMS]
    columns = list(dict.fromkeys([metric, *catalogue.listed()]))
    rows = []
    for run in runs:
        row: dict[str, Any] = {"run_id": run.info.run_id, "status": run_status(run.info.status, run.data.tags)}
        row.update({k: run.data.params.get(k) for k in differing})
        row.update({m: run.data.metrics.get(metric_key(m)) for m in columns})
        rows.append(row)
    table = pd.DataFrame(rows)
    own = {k: v for p in params for k, v in catalogue.own_of(p).items()}
    table = table.sort_values(metric, ascending=lower_is_better(metric, own) if minimize is None else minimize,
                              na_position="last", kind="stable")
    table = table.dropna(axis=1, how="all")
    if (table["status"] == "FINISHED").all():
        table = table.drop(columns="status")
    shown = [m for m in columns if m in table]
    varies = [m for m in shown[1:] if table[m].nunique() > 1]
    order = [c for c in table.columns if c not in shown] + shown[:1] + varies + [m for m in shown[1:] if m not in varies]
    return table[order].reset_index(drop=True), signature_warnings(params)


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
    return compare_tables(run_table(client, run_a), run_table(client, run_b), compared_names(known, metrics),
                          resamples, seed, confidence)


def compared_names(known: list[str], metrics: list[str] | None = None) -> list[str]:
    """The metrics a comparison of two runs tests, in the summary's order: one family for Holm's correction
    whoever shows it (``ragmem compare``'s terminal and ``--output``, ``ragmem report``'s diff.html)."""
    return summary_order(metrics or known)


def _coverage(table: Any, names: list[str]) -> dict[str, dict[str, Any]]:
    """How many examples each metric was scored on in one run's table, of how many it could have
    been (:func:`ragmem.metrics.scored.chunk_coverage`, chunk by chunk)."""
    out: dict[str, dict[str, Any]] = {}
    for chunk in chunks_of(table):
        out = scored.merged(out, scored.chunk_coverage(chunk, names))
    return out


def _add_coverage(rows: list[dict[str, Any]], a: Any, b: Any, min_share: float) -> None:
    """Each row's coverage in A and B (``coverage_a``, ``coverage_b``: ``{scored, of}``) and, when a
    side was scored on less than ``min_share`` of its examples (``report.min_coverage``), ``partial``:
    that side's count and main reason, as a run's summary says it."""
    names = [r["metric"] for r in rows]
    sides = {"a": _coverage(a, names), "b": _coverage(b, names)}
    for row in rows:
        partial = {}
        for side, found in sides.items():
            c = found.get(row["metric"])
            if c is None:
                continue
            row[f"coverage_{side}"] = {"scored": c["scored"], "of": c["of"]}
            partial.update({side.upper(): why for why in scored.partial({row["metric"]: c}, min_share).values()})
        if partial:
            row["partial"] = partial


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
    # every metric is tested at once: Holm's correction over them. Only a metric already below alpha
    # could survive it, and its p-value needs finer permutations than --resamples gives: those are
    # tested again with enough (the others' p-values stand; Holm's m is the same)
    alpha, scoring = 1 - confidence, scoring_of(settings_a)
    permutations = permutations_for(sum(r["p_value"] is not None for r in rows), alpha, resamples)
    for row in rows:
        row["permutations"] = resamples
    candidates = [r["metric"] for r in rows if r["p_value"] is not None and r["p_value"] < alpha]
    if candidates and permutations > resamples:
        finer = {r["metric"]: r for r in paired_rows(a, b, candidates, *scoring, resamples, seed, confidence,
                                                     permutations=permutations)[0]}
        for row in rows:
            if row["metric"] in finer:
                row["p_value"], row["permutations"] = finer[row["metric"]]["p_value"], permutations
    holm(rows, alpha)
    for row in rows:
        row["min_detectable"] = min_detectable(row["ci_low"], row["ci_high"], confidence)
    _add_coverage(rows, a, b, float(run_setting(settings_a, "report.min_coverage")))
    warnings = signature_warnings([settings_a, settings_b])
    if n_shared < max(len(a), len(b)):
        warnings.append(f"compared on the {n_shared} examples the runs share")
    differing = {k: [settings_a.get(k), settings_b.get(k)] for k in sorted(set(settings_a) | set(settings_b))
                 if settings_a.get(k) != settings_b.get(k) and k not in _VOLATILE}
    groups = next((r["n_clusters"] for r in rows if r.get("n_clusters") is not None), None)
    unit = ({"unit": "examples", "n": n_shared} if groups is None else
            {"unit": "clusters", "n": groups, "by": settings_a.get("stats.cluster_by")})
    return {"run_a": run_a, "run_b": run_b, "n_shared": n_shared, "resampled": unit, "resamples": resamples, "seed": seed,
            "confidence": confidence, "permutations": max([resamples, *(r["permutations"] for r in rows)]),
            "test": "paired bootstrap CI; approximate randomization p-value (two-sided)",
            "correction": f"Holm over the {sum(r['p_value'] is not None for r in rows)} metrics with a p-value",
            "settings_that_differ": differing, "warnings": warnings, "metrics": rows,
            "judge": {"a": judge_of(run_a_info), "b": judge_of(run_b_info)}}
