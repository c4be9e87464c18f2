"""The judge as a sweep dimension: ``sweep.grid`` varying ``judge.*`` (model, base_url,
prompt_variant) or ``rubrics.*`` (a rubric's text) beside the agent's settings.

- **One agent run per agent configuration.** Grid points that differ only in judge settings share
  their agent's answers: the first point of each agent configuration calls the agent, its siblings
  read the answers from its journal (the ``agent_outputs.jsonl`` of its run folder) and only judge.
- **Do the judges agree?** For each pair of judges (each distinct set of judge settings), Kendall's
  tau-b between their rankings of the agent configurations by the sweep's objective, with a
  percentile bootstrap interval (the examples resampled, the same draw for every configuration, so
  the interval is of the ranking, not of one configuration's noise), and which configuration each
  judge chose (the sweep's own choice, among that judge's configurations).

    tau_b = (C - D) / sqrt((n0 - n1) (n0 - n2))

C and D count the concordant and discordant pairs of configurations, n0 = n (n - 1) / 2, n1 and n2
the pairs tied in the first and the second ranking (scipy.stats.kendalltau's default); null when a
ranking is all ties (or fewer than two configurations are shared).
"""

from __future__ import annotations

import copy
import math
from typing import Any, Sequence

import numpy as np

from ragmem.metrics.generation import scorer_for
from ragmem.run import sweep as sweeps
from ragmem.stats import intervals as stats
from ragmem.stats.paired_runs import frame_of

JUDGE_PREFIXES = ("judge.", "rubrics.")


def is_judge_key(key: str) -> bool:
    """Whether a grid key sets the judge (its model, endpoint, prompts, a rubric), not the agent."""
    return key.startswith(JUDGE_PREFIXES)


def agent_part(point: dict[str, Any]) -> tuple:
    return tuple((k, repr(v)) for k, v in point.items() if not is_judge_key(k))


def judge_part(point: dict[str, Any]) -> tuple:
    return tuple((k, repr(v)) for k, v in point.items() if is_judge_key(k))


def varies_judge(points: Sequence[dict[str, Any]]) -> bool:
    return len({judge_part(p) for p in points}) > 1


def answer_sources(points: Sequence[dict[str, Any]]) -> dict[int, int]:
    """Grid point index -> the index of the sibling whose agent answers it reuses (the first point
    of the same agent configuration); points that call the agent themselves are not keys."""
    first: dict[tuple, int] = {}
    out = {}
    for i, point in enumerate(points):
        key = agent_part(point)
        if key in first:
            out[i] = first[key]
        else:
            first[key] = i
    return out


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b of two rankings (module doc); ``None`` when undefined.

    >>> kendall_tau([1, 2, 3], [3, 2, 1]), kendall_tau([1, 2, 3, 4], [1, 3, 2, 4])
    (-1.0, 0.6666666666666666)
    """
    n = len(x)
    concordant = discordant = tied_x = tied_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                tied_x += 1
                tied_y += 1
            elif dx == 0:
                tied_x += 1
            elif dy == 0:
                tied_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    n0 = n * (n - 1) / 2
    denominator = math.sqrt((n0 - tied_x) * (n0 - tied_y))
    return None if denominator == 0 else (concordant - discordant) / denominator


def _label(part: tuple) -> str:
    return ",".join(f"{k}={eval_repr(v)}" for k, v in part) or "(the base config's judge)"


def eval_repr(text: str) -> str:
    """A value's repr as shown: strings without their quotes."""
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def _resampled(agg, index: np.ndarray) -> np.ndarray:
    """The metric of ``agg`` on each resample (rows of example indices)."""
    if agg.kind == "sum":
        return agg.reduce_many(agg.data[index].sum(axis=1))
    return agg.reduce_many(agg.data[index])


def agreement(children: list[dict[str, Any]], tables: dict[int, Any], spec, cfg) -> dict[str, Any] | None:
    """Each judge's choice and, for each pair of judges, Kendall's tau between their rankings of the
    agent configurations (with its bootstrap interval); ``None`` when the grid does not vary the judge."""
    points = [c["params"] for c in children]
    if not varies_judge(points):
        return None
    judges = list(dict.fromkeys(judge_part(p) for p in points))
    agents = list(dict.fromkeys(agent_part(p) for p in points))
    cell = {(judge_part(c["params"]), agent_part(c["params"])): i for i, c in enumerate(children)
            if c.get("status") == "FINISHED" and c["metrics"].get(spec.metric) is not None}
    out: dict[str, Any] = {"metric": spec.metric, "judges": [], "pairs": []}
    for judge in judges:
        members = [copy.deepcopy(c) for c in children if judge_part(c["params"]) == judge]
        top = sweeps.pick_best(members, spec)
        if top is not None:
            member_tables = {k: tables[cell[(judge, agent_part(c["params"]))]] for k, c in enumerate(members)
                             if (judge, agent_part(c["params"])) in cell}
            sweeps.mark_against_best(members, member_tables, members.index(top), spec, cfg)
        chosen = sweeps.choose(members, spec)
        out["judges"].append({"judge": dict((k, eval_repr(v)) for k, v in judge), "label": _label(judge),
                              "chosen": None if chosen is None else {
                                  "run_id": chosen.get("run_id"),
                                  "agent": {k: v for k, v in chosen["params"].items() if not is_judge_key(k)},
                                  spec.metric: chosen["metrics"][spec.metric]}})
    scorer = scorer_for(cfg.generation.tokenizer, cfg.generation.bleu_tokenize)
    rng = np.random.default_rng(cfg.seed)
    for a in range(len(judges)):
        for b in range(a + 1, len(judges)):
            shared = [agent for agent in agents if (judges[a], agent) in cell and (judges[b], agent) in cell]
            pair = {"a": _label(judges[a]), "b": _label(judges[b]), "n_configurations": len(shared),
                    "kendall_tau": None, "ci": None}
            if len(shared) >= 2:
                ranks = [[children[cell[(j, agent)]]["metrics"][spec.metric] for agent in shared] for j in (judges[a], judges[b])]
                pair["kendall_tau"] = kendall_tau(*ranks)
                pair["ci"] = _tau_interval([[tables.get(cell[(j, agent)]) for agent in shared] for j in (judges[a], judges[b])],
                                           spec.metric, cfg, scorer, rng)
            out["pairs"].append(pair)
    return out


def _tau_interval(grid_tables: list[list[Any]], metric: str, cfg, scorer, rng) -> list[float] | None:
    """Percentile interval of tau over ``stats.resamples`` bootstrap draws of the examples (one draw
    for every configuration and both judges: the rankings move together); ``None`` when the
    configurations were not scored on the same examples or a table is missing."""
    if any(t is None for row in grid_tables for t in row):
        return None
    flat = [frame_of(t) for row in grid_tables for t in row]  # (whole: drawn by position)
    if len({tuple(t["id"]) for t in flat}) != 1 or cfg.stats.resamples < 1:
        return None
    aggs = [stats.aggregators(t, [metric], cfg.zero_division, scorer).get(metric) for t in flat]
    if any(a is None for a in aggs):
        return None
    n, resamples = len(flat[0]), cfg.stats.resamples
    index = rng.integers(0, n, size=(resamples, n))
    values = np.array([_resampled(agg, index) for agg in aggs])  # (configurations x judges, resamples)
    half = len(grid_tables[0])
    taus = [kendall_tau(values[:half, r].tolist(), values[half:, r].tolist()) for r in range(resamples)]
    kept = [t for t in taus if t is not None and not math.isnan(t)]
    if not kept:
        return None
    tail = (1 - cfg.stats.confidence) / 2
    return [float(np.quantile(kept, tail)), float(np.quantile(kept, 1 - tail))]
