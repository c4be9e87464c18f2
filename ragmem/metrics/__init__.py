"""Metric registry: which metric names exist and the one function that computes a selection of them.

Metrics read the per-example results table (one row per example, see :mod:`ragmem.pipeline`) and
return aggregates, per-example columns and counts of undefined cases. A family computes several
names from the same statistics; the config key ``metrics`` selects names, and only the families
that produce a selected name run. Later metrics plug in by adding a family here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from ragmem.errors import ConfigError
from ragmem.metrics import classification, latency
from ragmem.metrics.base import MetricResult, nanmean
from ragmem.metrics.coverage import coverage
from ragmem.schema import STAGES
from ragmem.text.keywords import KeywordExtractor


@dataclass(frozen=True)
class MetricContext:
    """Settings metrics need besides the table."""

    keywords: KeywordExtractor
    zero_division: float = 0.0


def _scored(table: pd.DataFrame) -> pd.DataFrame:
    """Rows whose agent call succeeded."""
    return table[table["error"].isna()]


def _classification(table: pd.DataFrame, ctx: MetricContext) -> MetricResult:
    if table["label"].isna().all():
        return MetricResult(values={n: None for n in classification.NAMES},
                            notes=["no labels in the dataset: accuracy/precision/recall/f1 not computed"])
    rows = _scored(table)
    rows = rows[rows["label"].notna() & rows["verdict"].notna()]
    result = classification.classification_metrics(rows["label"].astype(int).tolist(),
                                                   rows["verdict"].astype(int).tolist(),
                                                   ctx.zero_division)
    result.values["n_classified"] = float(len(rows))
    return result


def _coverage(table: pd.DataFrame, ctx: MetricContext) -> MetricResult:
    K = ctx.keywords
    answer_cov: list[float | None] = []
    reference_cov: list[float | None] = []
    undefined = {"avg_coverage": 0, "reference_coverage": 0}
    for row in table.itertuples(index=False):
        if isinstance(row.error, str):
            answer_cov.append(None)
            reference_cov.append(None)
            continue
        context_kw = K.union(c["text"] for c in row.contexts)
        value, was_undefined = coverage(K(row.generated_answer or ""), context_kw, ctx.zero_division)
        answer_cov.append(value)
        undefined["avg_coverage"] += was_undefined
        value, was_undefined = coverage(K(row.reference_answer or ""), context_kw, ctx.zero_division)
        reference_cov.append(value)
        undefined["reference_coverage"] += was_undefined
    return MetricResult(
        values={"avg_coverage": nanmean(answer_cov), "reference_coverage": nanmean(reference_cov)},
        columns={"coverage": answer_cov, "reference_coverage": reference_cov},
        undefined=undefined)


def _latency(table: pd.DataFrame, ctx: MetricContext) -> MetricResult:
    measured = table["latency_s"].dropna()
    values: dict[str, float | None] = dict(latency.latency_stats(measured))
    values["n_latency_measured"] = float(len(measured))
    stage_columns = [c for c in table.columns if c.startswith("stage_") and c.endswith("_s")]
    ordered = sorted(stage_columns, key=lambda c: (STAGES.index(c[6:-2]) if c[6:-2] in STAGES else 99, c))
    for column in ordered:
        values.update(latency.latency_stats(table[column].dropna(), prefix=column[6:-2]))
    notes = [] if len(measured) else ["latency not measured (replayed data without latency_ms)"]
    return MetricResult(values=values, notes=notes)


@dataclass(frozen=True)
class Family:
    names: tuple[str, ...]
    compute: Callable[[pd.DataFrame, MetricContext], MetricResult]


FAMILIES: tuple[Family, ...] = (
    Family(classification.NAMES, _classification),
    Family(("avg_coverage", "reference_coverage"), _coverage),
    Family(latency.NAMES, _latency),
)

#: Every selectable metric name, in display order. The default selection is all of them.
METRIC_NAMES: tuple[str, ...] = tuple(n for f in FAMILIES for n in f.names)


def validate_selection(names: list[str]) -> list[str]:
    unknown = [n for n in names if n not in METRIC_NAMES]
    if unknown:
        raise ConfigError(f"metrics: unknown metric(s) {', '.join(map(repr, unknown))}; "
                          f"available: {', '.join(METRIC_NAMES)}")
    return list(names)


def compute_metrics(table: pd.DataFrame, selected: list[str], ctx: MetricContext) -> MetricResult:
    """Run the families that produce a selected name; keep the selected names plus their
    companions (confusion counts, per-stage latencies, measured counts)."""
    selected = validate_selection(selected)
    merged = MetricResult(values={})
    for family in FAMILIES:
        wanted = [n for n in family.names if n in selected]
        if not wanted:
            continue
        result = family.compute(table, ctx)
        dropped = set(family.names) - set(wanted)
        stage_suffix = {latency._SUFFIXES[n] for n in dropped} if family.compute is _latency else set()
        for name, value in result.values.items():
            if name in dropped or name.rsplit("_", 1)[-1] in stage_suffix and "_latency_" in name:
                continue
            merged.values[name] = value
        merged.columns.update(result.columns)
        merged.undefined.update({k: v for k, v in result.undefined.items() if k in wanted})
        merged.notes.extend(result.notes)
    return merged
