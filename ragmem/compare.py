"""Comparing runs: a table of the runs of an experiment, and (see ``paired``) two runs example by
example.

Two numbers are comparable only when the settings that produced them match (the sacrebleu
practice): each run logs signatures (``keywords.signature``, ``judge.signature``, ``data.sha256``,
``ranking.k``) and ``compare`` warns when they differ between the runs it shows.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ragmem.errors import RagmemError

SIGNATURE_PARAMS = ("keywords.signature", "judge.signature", "data.sha256", "ranking.k", "zero_division")
DEFAULT_COLUMNS = ("f1", "accuracy", "reference_coverage", "hit_rate_at_10", "mrr_at_10", "latency_p95")
_VOLATILE = {"git_commit", "data.path", "run_name"}


def lower_is_better(metric: str) -> bool:
    return "latency" in metric or metric.endswith(("_error", "_loss")) or metric.startswith("n_")


def signature_warnings(params: list[dict[str, str]]) -> list[str]:
    warnings = []
    for key in SIGNATURE_PARAMS:
        values = {p.get(key) for p in params if p.get(key) is not None}
        if len(values) > 1:
            warnings.append(f"runs differ in {key} ({len(values)} values): their scores are not directly comparable")
    return warnings


def list_runs(client, experiment: str, metric: str = "f1", last: int = 20) -> tuple[pd.DataFrame, list[str]]:
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
    params = [r.data.params for r in runs]
    keys = sorted({k for p in params for k in p})
    differing = [k for k in keys if k not in _VOLATILE and not k.startswith(("sweep.", "best."))
                 and len({p.get(k) for p in params}) > 1 and k not in SIGNATURE_PARAMS]
    columns = list(dict.fromkeys([metric, *DEFAULT_COLUMNS]))
    rows = []
    for run in runs:
        row: dict[str, Any] = {"run_id": run.info.run_id, "status": run.info.status}
        row.update({k: run.data.params.get(k) for k in differing})
        row.update({m: run.data.metrics.get(m) for m in columns})
        rows.append(row)
    table = pd.DataFrame(rows)
    table = table.sort_values(metric, ascending=lower_is_better(metric), na_position="last", kind="stable")
    table = table.dropna(axis=1, how="all")
    if (table["status"] == "FINISHED").all():
        table = table.drop(columns="status")
    return table.reset_index(drop=True), signature_warnings(params)
