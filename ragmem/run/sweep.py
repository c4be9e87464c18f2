"""Sweeps: expand a grid of settings, pick the best configuration, build the comparison.

    sweep:
      grid:                          # any dotted config keys -> list of values (cartesian product)
        retriever.type: [bm25, tfidf, hybrid]
        retriever.top_k: [1, 3, 5, 10]
      samples: null                  # N: run N distinct grid points drawn at random (seed) instead
      objective: {metric: ndcg_at_10, goal: maximize}
      constraints: [{metric: latency_p95, max: 0.5}]
      tie_break: [{setting: retriever.top_k, goal: minimize}]   # among the configurations tied for best
      max_parallel: 2                # children evaluated at once (Prefect thread-pool task runner)

The sweep is pure data here; :func:`ragmem.run.engine.sweep` runs it.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import random
import threading
from dataclasses import dataclass
from typing import Any, Sequence

import pandas as pd

from ragmem.config.loading import as_section, assign, RunConfig
from ragmem.config.sweep_settings import SweepSettings
from ragmem.errors import ConfigError
from ragmem.metrics import catalogue
from ragmem.metrics.generation import scorer_for
from ragmem.run.summary import store_location
from ragmem.stats.paired_runs import paired_rows


@dataclass(frozen=True)
class SweepSpec:
    grid: dict[str, Any]  # a key's values (a list), or (method tpe) its range {low, high, step?, log?}
    samples: int | None
    metric: str
    goal: str
    constraints: tuple[dict[str, Any], ...]
    max_parallel: int
    plot_metrics: tuple[str, ...] | None
    tie_break: tuple[dict[str, Any], ...] = ()
    method: str = "grid"
    race: dict[str, Any] | None = None       # sweep.race: {batch, alpha, indifference} (method race)
    budget: dict[str, Any] | None = None     # sweep.budget: {judge_requests}
    trials: int | None = None                # sweep.trials (method tpe; a key's grid may then be a range)

    @property
    def races(self) -> bool:
        return self.method == "race"

    @property
    def keys(self) -> list[str]:
        return list(self.grid)


def parse_sweep(raw: dict[str, Any] | SweepSettings | None) -> SweepSpec:
    """The ``sweep`` section (validated by :class:`ragmem.config.settings.SweepSettings`) as a spec."""
    settings = as_section(SweepSettings, raw, "sweep")
    if not settings.grid:
        raise ConfigError("sweep.grid: expected a mapping of dotted.key -> [values], e.g. retriever.top_k: [1, 3, 5]")
    constraints = tuple(c.model_dump(exclude_none=True) for c in settings.constraints)
    # (a tie_break setting the grid does not vary is the same for every child: it breaks no tie)
    tie_break = tuple(t.model_dump(exclude_none=True) for t in settings.tie_break)
    grid = {k: list(v) if isinstance(v, list) else v.model_dump(exclude_none=True) for k, v in settings.grid.items()}
    return SweepSpec(grid, settings.samples, settings.objective.metric,
                     settings.objective.goal, constraints, settings.max_parallel,
                     tuple(settings.plot_metrics) if settings.plot_metrics else None, tie_break, settings.method,
                     settings.race.model_dump(), settings.budget.model_dump(exclude_none=True) if settings.budget else None,
                     settings.trials)


def _ends(values: Any) -> list[Any]:
    """What a key of a tpe sweep is checked at: its listed values, or a range's two ends."""
    return list(values) if isinstance(values, list) else [values["low"], values["high"]]


def expand(spec: SweepSpec, seed: int = 0) -> list[dict[str, Any]]:
    """Grid points as ``{dotted.key: value}``, in grid order; ``samples`` draws N of them (seeded). A tpe
    sweep's points are what its settings are checked at before any call (Optuna proposes the trials): the
    first value of each key, and each key's other values (a range: its ends) with the others at their first."""
    if spec.method == "tpe":
        first = {k: _ends(v)[0] for k, v in spec.grid.items()}
        corners = [first] + [{**first, k: value} for k, v in spec.grid.items() for value in _ends(v)[1:]]
        return [dict(p) for p in {json.dumps(p, sort_keys=True, default=str): p for p in corners}.values()]
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


def point_configs(base: dict[str, Any], spec: SweepSpec, seed: int) -> list[tuple[dict[str, Any], Any]]:
    """Every grid point with the validated configuration it makes (a :class:`RunConfig`); a bad
    value names the point: ``sweep.grid (top_k=0): retriever.top_k: ...``."""
    out = []
    for point in expand(spec, seed):
        try:
            out.append((point, RunConfig.from_dict(apply_point(base, point))))
        except ConfigError as exc:
            raise ConfigError(f"sweep.grid ({child_name(point)}): {exc}") from None
    return out


def share_retrievals(configs: Sequence[RunConfig]) -> None:
    """Each reference-agent child told the deepest retrieval of the children that share its index (the
    same corpus, chunking, retriever, embeddings and keywords): the first to ask a query retrieves at
    that depth and the others cut its ranking (:class:`ragmem.reference.retrievers.Rankings`)."""
    def index_of(c: RunConfig) -> str:
        return json.dumps([c.corpus.model_dump(mode="json"), c.retriever.type, c.embeddings.model_dump(mode="json"),
                           c.keywords.model_dump(mode="json")], sort_keys=True, default=str)

    def depth_of(c: RunConfig) -> int:
        r = c.retriever
        return max(r.top_k, r.rerank_candidates) if r.reranker != "none" else r.top_k

    deepest: dict[str, int] = {}
    for c in configs:
        if c.agent.type == "reference":
            deepest[index_of(c)] = max(deepest.get(index_of(c), 0), depth_of(c))
    for c in configs:
        if c.agent.type == "reference":
            c._retrieval_depth = deepest[index_of(c)]


def child_name(point: dict[str, Any]) -> str:
    return ",".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in point.items())


class Announced:
    """A sweep child's function that says when the child is done: the sweep's stage (``overall``,
    into which the children's own stages are folded, :func:`ragmem.runtime.progress.fold`) advances and one
    line names the child with its objective and interval, as it finishes, not at the sweep's end."""

    def __init__(self, fn, overall, names: dict, metric: str, log):
        self.fn, self.overall, self.names, self.metric, self.log = fn, overall, names, metric, log
        self.announced: set = set()
        self._lock = threading.Lock()

    def __reduce__(self):  # to another process (a Dask worker): the plain function; the parent settles
        return (_plain, (self.fn,))

    @staticmethod
    def key(cfg, run_id: str | None):
        """A child's key: its run id, or (untracked) its config object."""
        return run_id or id(cfg)

    def __call__(self, cfg, run_id, *args: Any) -> Any:
        try:
            result = self.fn(cfg, run_id, *args)
        except Exception as exc:
            self.settle(cfg, run_id, exc)
            raise
        self.settle(cfg, run_id, result)
        return result

    def settle(self, cfg, run_id: str | None, outcome: Any) -> None:
        """Announce the child (``cfg``, ``run_id``) with its outcome (a result, or the exception), once."""
        key = self.key(cfg, run_id)
        with self._lock:
            if key in self.announced:
                return
            self.announced.add(key)
            if isinstance(outcome, BaseException):
                shown, failed = f"FAILED ({type(outcome).__name__})", 1
            else:
                value, ci = outcome["metrics"].get(self.metric), outcome.get("ci", {}).get(self.metric)
                shown = f"{self.metric}=n/a" if value is None else f"{self.metric}={value:.4f}"
                shown += f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci and None not in ci else ""
                failed = 0
            self.overall.advance(1, failed=failed)
            self.log("sweep: %d/%d configurations: %s -> %s", self.overall.done, self.overall.total,
                     self.names.get(key, "?"), shown)


def _plain(fn):
    return fn


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


def _candidates(children: list[dict[str, Any]], spec: SweepSpec) -> list[dict[str, Any]]:
    """The children that may be chosen: finished, with the objective, within the constraints and (a race)
    not ruled out by it."""
    return [c for c in children if c.get("status") == "FINISHED" and c.get("race", {}).get("candidate", True)
            and c["metrics"].get(spec.metric) is not None and feasible(c["metrics"], spec)]


def pick_best(children: list[dict[str, Any]], spec: SweepSpec) -> dict[str, Any] | None:
    """The top child: completed, meeting every constraint, with the best objective value (equal
    values: the earlier grid point). Never decided by latency jitter: see :func:`choose`."""
    candidates = _candidates(children, spec)
    if not candidates:
        return None
    sign = 1 if spec.goal == "maximize" else -1
    return max(candidates, key=lambda c: (sign * c["metrics"][spec.metric], -children.index(c)))


def choose(children: list[dict[str, Any]], spec: SweepSpec) -> dict[str, Any] | None:
    """The chosen configuration, after :func:`mark_against_best`: among the candidates tied for best
    (the top child and every one not significantly worse than it on the same examples: the paired
    test of ``ragmem compare``), the first by ``sweep.tie_break`` (each a grid setting or a metric,
    lowest first for ``minimize``), then by the objective value, then grid order. Each tied child is
    marked ``tied_for_best``."""
    candidates = _candidates(children, spec)
    if not candidates:
        return None
    tied = [c for c in candidates if (c.get("vs_best") or {}).get("is_best")
            or (c.get("vs_best") and not c["vs_best"]["significantly_worse"])]
    for c in children:
        c["tied_for_best"] = c in tied
    sign = 1 if spec.goal == "maximize" else -1

    def order(c: dict[str, Any]) -> tuple:
        keys = []
        for t in spec.tie_break:
            value = c["params"].get(t["setting"]) if "setting" in t else c["metrics"].get(t["metric"])
            numeric = isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))
            keys.append((not numeric, (value if t["goal"] == "minimize" else -value) if numeric else 0))
        return (*keys, -sign * c["metrics"][spec.metric], children.index(c))

    return min(tied or candidates, key=order)


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
                    "significantly_worse_than_best": versus.get("significantly_worse"),
                    "tied_for_best": c.get("tied_for_best")})
        row["error"] = c.get("error")
        rows.append(row)
    return pd.DataFrame(rows)


def mark_against_best(children: list[dict[str, Any]], tables: dict, best: int, spec: SweepSpec, cfg) -> None:
    """Each finished child's objective against the best child's, on the same examples: difference,
    paired-bootstrap interval, randomization p-value, and whether it is significantly worse."""
    scorer = scorer_for(cfg.generation.tokenizer, cfg.generation.bleu_tokenize)
    for i, child in enumerate(children):
        if i not in tables:
            continue
        if i == best:
            child["vs_best"] = {"diff": 0.0, "ci_low": 0.0, "ci_high": 0.0, "p_value": 1.0,
                                "significantly_worse": False, "is_best": True}
            continue
        rows, _ = paired_rows(tables[best], tables[i], [spec.metric], cfg.zero_division, scorer,
                              cfg.stats.resamples, cfg.seed, bootstrap=cfg.stats.bootstrap)
        if not rows:
            continue
        result = rows[0]
        worse = result["diff"] is not None and (result["diff"] < 0 if spec.goal == "maximize" else result["diff"] > 0)
        child["vs_best"] = {k: result[k] for k in ("diff", "ci_low", "ci_high", "p_value")} | {
            "significantly_worse": bool(worse and result["p_value"] is not None and result["p_value"] < 0.05),
            "is_best": False}


def parent_record(children: list[dict[str, Any]], best: dict[str, Any] | None, spec: SweepSpec, cfg,
                  summary: dict[str, Any]) -> dict[str, Any]:
    """What the sweep's parent run logs: the comparison table (CSV + MLflow table), ``sweep.json``,
    the plots, the best configuration (``best.*`` params, ``best_run_id`` tag, ``best_<metric>``)."""
    from ragmem.tracking import plots  # slow import (matplotlib): only where a plot is drawn

    table = comparison_table(children, spec)
    done = table[table["status"] == "FINISHED"]
    metrics = list(spec.plot_metrics or [])
    if not metrics:
        metrics = [m for m in dict.fromkeys([spec.metric, *catalogue.beside_objective(cfg.ks)]) if m in done]
    chosen = best.get("run_id") if best else None  # marked in every plot
    figures = {f"plots/{metric}_by_setting.png": plots.metric_by_setting_figure(done, metric, spec.keys, chosen)
               for metric in metrics if metric in done and done[metric].notna().any()}
    if "avg_latency" in done and done["avg_latency"].notna().all() and spec.metric in done and len(done):
        ok = [c for c in children if c.get("status") == "FINISHED" and c["metrics"].get(spec.metric) is not None]
        lat = [c["metrics"]["avg_latency"] for c in ok]
        quality = [c["metrics"][spec.metric] for c in ok]
        labels = [child_name(c["params"]) for c in ok]
        figures["plots/quality_vs_latency.png"] = plots.pareto_figure(
            lat, quality, labels, pareto_front(list(zip(lat, quality))), spec.metric, "avg_latency",
            [c.get("ci", {}).get("avg_latency") for c in ok], [c.get("ci", {}).get(spec.metric) for c in ok],
            [bool(c.get("tied_for_best")) for c in ok],
            next((i for i, c in enumerate(ok) if chosen and c["run_id"] == chosen), None))
    metrics_out: dict[str, float | None] = {"n_children": float(len(children)),
                                            "index_builds": float(summary["index_builds"]),
                                            "n_children_failed": float((table["status"] != "FINISHED").sum())}
    record: dict[str, Any] = {"tables": {"comparison": table}, "json_files": {"sweep.json": summary},
                              "figures": figures, "metrics": metrics_out}
    metrics_out["n_tied_for_best"] = float(sum(bool(c.get("tied_for_best")) for c in children))
    race = summary.get("race")
    if race:  # what the race spent, against what the grid would have
        metrics_out.update({f"race.{k}": race[k] for k in ("judge_requests", "grid_judge_requests", "judge_requests_ratio",
                                                            "examples_judged", "grid_examples") if race[k] is not None})
        figures["plots/race.png"] = plots.race_figure([child_name(c["params"]) for c in children],
                                                      [c["race"]["stopped_at"] for c in children],
                                                      [c["race"]["reason"] for c in children], race["examples"])
    if best is not None:
        metrics_out[f"best_{spec.metric}"] = best["metrics"][spec.metric]
        record["tags"] = {"best_run_id": best["run_id"]} if best["run_id"] else {}
        record["params"] = {f"best.{k}": v for k, v in best["params"].items()}
    return record


def summary(parent_id: str | None, cfg, spec: SweepSpec, children: list[dict[str, Any]], best: dict[str, Any] | None,
            index_builds: int, base: dict[str, Any]) -> dict[str, Any]:
    """The sweep's summary (``sweep.json``): the objective, every child, the best and its whole config."""
    return {"parent_run_id": parent_id, "experiment": cfg.experiment,
            "tracking_uri": store_location(cfg.tracking_uri) if parent_id else None,
            "objective": {"metric": spec.metric, "goal": spec.goal, "constraints": list(spec.constraints),
                          "tie_break": list(spec.tie_break)},
            "tied_for_best": [c["run_id"] for c in children if c.get("tied_for_best")],
            "index_builds": index_builds, "children": children,
            "best": None if best is None else {"run_id": best["run_id"], "params": best["params"],
                                               "metrics": best["metrics"],
                                               "config": apply_point(base, best["params"])}}
