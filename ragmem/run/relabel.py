"""``ragmem labels import RUN CSV``: human labels attached to a finished run, and every estimate that
rests on labels recomputed from the run's per-example table, without calling the agent or the
judge again: the judge's agreement with the labels (kappa, agreement, sensitivity, specificity,
accuracy/precision/recall/f1), ``pass_rate_ppi`` and the unreliable-judge verdict.

Everything is checked before anything is written: a wrong run id, a sheet with a missing column, an
unknown example id or a label that is not 0/1 is one line (exit 2) and nothing is attached.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from ragmem.clients.endpoints import check_store
from ragmem.config.settings import JudgeSettings, run_setting
from ragmem.judges import labels
from ragmem.metrics import catalogue, classification, reliability, verdicts
from ragmem.metrics._division import parse_zero_division
from ragmem.report import html as report_html
from ragmem.run.summary import clean_number
from ragmem.runtime import progress
from ragmem.schema import LABEL_SET_ASIDE
from ragmem.stats import clusters
from ragmem.stats import intervals as stats
from ragmem.tracking import record_labels, Tracker
from ragmem.tracking.runs import load_run_table, resolve_run_id, run_summary

#: what labels change: the figures of these families (pass_rate is recomputed, and stays the same)
_FAMILIES = (verdicts, reliability, classification)


def _settings(params: dict[str, str]) -> SimpleNamespace:
    """The run's settings that the recomputation needs, from its params; a setting a run did not log
    (it was left at its default) takes the schema's default (:func:`ragmem.config.settings.run_setting`)."""
    signature = dict(part.split(":", 1) for part in params.get("stats.signature", "").split("|") if ":" in part)

    def judge(name: str, kind: type) -> Any:
        return kind(run_setting(params, f"judge.{name}"))

    return SimpleNamespace(
        judge=JudgeSettings.model_construct(type=judge("type", str), threshold=judge("threshold", float),
                                            samples=judge("samples", int), temperature=judge("temperature", float)),
        min_kappa=judge("min_kappa", float),
        resamples=int(signature.get("bootstrap", run_setting(params, "stats.resamples"))),
        confidence=float(signature.get("conf", run_setting(params, "stats.confidence"))),
        seed=int(signature.get("seed", run_setting(params, "seed"))),
        method=signature.get("method", "classic"),  # (not the schema's: a run before 2026-12 did not say, and was classic)
        zero_division=parse_zero_division(str(run_setting(params, "zero_division"))))


def recompute(table, s: SimpleNamespace, logged: set[str]) -> tuple[dict[str, float | None], dict, list[str]]:
    """The label-dependent figures of a run's table (labels attached), with the run's settings ``s``
    (:func:`_settings`): values, intervals, notes."""
    ctx = SimpleNamespace(judge=s.judge, confidence=s.confidence, zero_division=s.zero_division)
    wanted = [*reliability.NAMES] if "answer_correctness" in logged else [n for n in reliability.NAMES
                                                                          if n != "answer_correctness_ppi"]
    values: dict[str, float | None] = {}
    own_ci: dict[str, tuple[float, float]] = {}
    notes: list[str] = []
    for family, names in ((verdicts, ["pass_rate"]), (reliability, wanted),
                          (classification, list(classification.NAMES))):
        result = family.compute(table, ctx, names)
        values.update(result.values)
        own_ci.update(result.ci)
        notes += result.notes
        for column, cells in result.columns.items():
            table[column] = cells
    names = [n for n, v in values.items() if v is not None and n not in own_ci]
    with progress.stage("bootstrap"):
        keys = clusters.table_keys(table) if s.method == "poisson" else None
        groups = clusters.resampled(len(np.unique(keys))) if keys is not None and clusters.COLUMN in table else None
        keys = stats.example_keys(table["id"]) if keys is not None and groups is None else keys  # (too few: examples)
        ci = stats.bootstrap(stats.aggregators(table, names, s.zero_division), len(table), s.resamples, s.seed,
                             s.confidence, keys, groups)
    return values, {**ci, **own_ci}, notes


def import_labels(tracking_uri: str, run_ref: str, sheet: str | Path, encoding: str = "utf-8-sig") -> dict[str, Any]:
    """Attach the labels of ``sheet`` to run ``run_ref`` (an id or a unique prefix) and recompute;
    returns the run's updated summary (``labels_imported``: the file, how many, how many blank)."""
    check_store(tracking_uri)
    tracker = Tracker(tracking_uri)
    client = tracker.client
    run_id = resolve_run_id(client, run_ref)
    table = load_run_table(client, run_id)
    sheet = Path(sheet)
    answers: dict[str, str] = {}  # the answer each label judged, as the sheet shows it
    found, blank = labels.read_sheet(sheet, set(table["id"].astype(str)), run_id[:8], answers, encoding)
    summary = run_summary(client, run_id)  # every check is done before anything is written
    run = table.attrs["run"]
    table = labels.attach(table, found, answers)
    settings = _settings(summary.get("params") or run.data.params)
    values, ci, notes = recompute(table, settings, set(summary.get("metrics", {})))
    before = summary["metrics"]  # the recomputed figures where a run puts them: after pass_rate
    head = [k for k in before if catalogue.family_of(k) == "verdicts"]
    summary["metrics"] = {**{k: before[k] for k in head}, **{k: clean_number(v) for k, v in values.items()},
                          **{k: v for k, v in before.items() if k not in values and k not in head}}
    summary["ci"].update({k: list(v) for k, v in ci.items() if v is not None and k in values})
    for name in [k for k in summary["ci"] if k in values and ci.get(k) is None]:
        del summary["ci"][name]
    summary["counts"]["n_unlabelled"] = int(table["label"].isna().sum())
    if LABEL_SET_ASIDE in table:
        summary["counts"]["n_labels_set_aside"] = int(table[LABEL_SET_ASIDE].notna().sum())
    summary["notes"] = [n for n in summary.get("notes", [])
                        if not re.match(r"(no labels in the dataset|every label was set aside|pass_rate_ppi|labels: )", n)] + notes + [
        f"labels: {len(found)} imported from {sheet}" + (f" ({blank} rows left blank)" if blank else "")]
    summary["judge_unreliable"] = reliability.unreliable(values, ci, settings.min_kappa)
    summary["labels_imported"] = {"file": str(sheet), "n_labels": len(found), "n_blank": blank}
    by_id = table.set_index(table["id"].astype(str))
    rows = [(example, label, str(by_id.at[example, "query"]), str(by_id.at[example, "generated_answer"]))
            for example, label in found.items()]
    with progress.stage("logging labels to MLflow", len(rows)):
        record_labels(tracker, run_id, metrics=values, summary=summary, table=table, sheet=sheet,
                      rows=rows, report=report_html.run_page(summary, table))
    return summary
