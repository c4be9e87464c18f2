"""Sweeps: expand a grid of settings, pick the best configuration, build the comparison.

    sweep:
      grid:                          # any dotted config keys -> list of values (cartesian product)
        retriever.type: [bm25, tfidf, hybrid]
        retriever.top_k: [1, 3, 5, 10]
      samples: null                  # N: run N distinct grid points drawn at random (seed) instead
      objective: {metric: f1, goal: maximize}
      constraints: [{metric: latency_p95, max: 0.5}]
      max_parallel: 2                # children evaluated at once (Prefect thread-pool task runner)

The sweep is pure data here; ``flows/sweep.py`` runs it.
"""

from __future__ import annotations

import copy
import itertools
import math
import random
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ragmem.config import assign
from ragmem.errors import ConfigError

SWEEP_DEFAULTS: dict[str, Any] = {
    "grid": {},
    "samples": None,
    "objective": {"metric": "f1", "goal": "maximize"},
    "constraints": [],
    "max_parallel": 2,
    "plot_metrics": None,
}


@dataclass(frozen=True)
class SweepSpec:
    grid: dict[str, list[Any]]
    samples: int | None
    metric: str
    goal: str
    constraints: tuple[dict[str, Any], ...]
    max_parallel: int
    plot_metrics: tuple[str, ...] | None

    @property
    def keys(self) -> list[str]:
        return list(self.grid)


def parse_sweep(raw: dict[str, Any] | None) -> SweepSpec:
    raw = {**SWEEP_DEFAULTS, **(raw or {})}
    unknown = set(raw) - set(SWEEP_DEFAULTS)
    if unknown:
        raise ConfigError(f"sweep: unknown setting(s) {', '.join(sorted(unknown))}; known: {', '.join(SWEEP_DEFAULTS)}")
    grid = raw["grid"]
    if not isinstance(grid, dict) or not grid:
        raise ConfigError("sweep.grid: expected a mapping of dotted.key -> [values], e.g. retriever.top_k: [1, 3, 5]")
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"sweep.grid.{key}: expected a non-empty list of values")
    objective = raw["objective"] or {}
    goal = objective.get("goal", "maximize")
    if goal not in ("maximize", "minimize"):
        raise ConfigError(f"sweep.objective.goal: expected maximize or minimize, got {goal!r}")
    if not isinstance(objective.get("metric"), str):
        raise ConfigError("sweep.objective.metric: expected a metric name, e.g. f1")
    constraints = raw["constraints"] or []
    for i, c in enumerate(constraints):
        if not isinstance(c, dict) or "metric" not in c or not ({"max", "min"} & set(c)):
            raise ConfigError(f"sweep.constraints[{i}]: expected {{metric: NAME, max: X}} or {{metric: NAME, min: X}}")
    samples = raw["samples"]
    if samples is not None and (not isinstance(samples, int) or samples < 1):
        raise ConfigError(f"sweep.samples: expected a positive integer or null, got {samples!r}")
    if not isinstance(raw["max_parallel"], int) or raw["max_parallel"] < 1:
        raise ConfigError(f"sweep.max_parallel: expected an integer >= 1, got {raw['max_parallel']!r}")
    plot = raw["plot_metrics"]
    return SweepSpec({k: list(v) for k, v in grid.items()}, samples, objective["metric"], goal,
                     tuple(constraints), raw["max_parallel"], tuple(plot) if plot else None)


def expand(spec: SweepSpec, seed: int = 0) -> list[dict[str, Any]]:
    """Grid points as ``{dotted.key: value}``, in grid order; ``samples`` draws N of them (seeded)."""
    points = [dict(zip(spec.keys, values)) for values in itertools.product(*spec.grid.values())]
    if spec.samples is not None and spec.samples < len(points):
        chosen = sorted(random.Random(seed).sample(range(len(points)), spec.samples))
        points = [points[i] for i in chosen]
    return points


def apply_point(base: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    """The base config with one grid point's values set (validated like ``--set``)."""
    config = copy.deepcopy(base)
    for key, value in point.items():
        config = assign(config, key.split("."), value)
    return config


def child_name(point: dict[str, Any]) -> str:
    return ",".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in point.items())


def feasible(metrics: dict[str, float | None], spec: SweepSpec) -> bool:
    for c in spec.constraints:
        value = metrics.get(c["metric"])
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return False
        if "max" in c and value > c["max"]:
            return False
        if "min" in c and value < c["min"]:
            return False
    return True


def pick_best(children: list[dict[str, Any]], spec: SweepSpec) -> dict[str, Any] | None:
    """The completed, feasible child with the best objective; ties go to the lower ``latency_p95``
    (when measured), then to the earlier grid point."""
    candidates = [c for c in children if c.get("status") == "FINISHED"
                  and c["metrics"].get(spec.metric) is not None and feasible(c["metrics"], spec)]
    if not candidates:
        return None
    sign = 1 if spec.goal == "maximize" else -1
    def latency(c):
        value = c["metrics"].get("latency_p95")
        return math.inf if value is None else value

    return max(candidates, key=lambda c: (sign * c["metrics"][spec.metric], -latency(c), -children.index(c)))


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the (latency, quality) points no other point dominates: lower or equal latency and
    higher or equal quality, strictly better in one."""
    front = []
    for i, (lat, q) in enumerate(points):
        dominated = any((l2 <= lat and q2 >= q) and (l2 < lat or q2 > q) for j, (l2, q2) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return front


def comparison_table(children: list[dict[str, Any]], spec: SweepSpec) -> pd.DataFrame:
    rows = []
    for c in children:
        row = {"run_id": c.get("run_id"), "status": c.get("status"), **{k: c["params"].get(k) for k in spec.keys}}
        row.update(c.get("metrics", {}))
        versus = c.get("vs_best") or {}
        row.update({"vs_best_diff": versus.get("diff"), "vs_best_p_value": versus.get("p_value"),
                    "significantly_worse_than_best": versus.get("significantly_worse")})
        row["error"] = c.get("error")
        rows.append(row)
    return pd.DataFrame(rows)
