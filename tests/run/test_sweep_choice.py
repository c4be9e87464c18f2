"""How a sweep picks its configuration: the top objective, the configurations tied with it by the
paired test, then the documented tie_break; never latency jitter."""

from __future__ import annotations

import pytest

from ragmem.errors import ConfigError
from ragmem.run import sweep


def _spec(**extra):
    return sweep.parse_sweep({"grid": {"retriever.top_k": [1, 3, 5], "memory.short_window": [1, 4]},
                              "objective": {"metric": "ndcg_at_10"}, **extra})


def _child(top_k, window, value, significantly_worse, latency):
    return {"run_id": f"k{top_k}w{window}", "status": "FINISHED",
            "params": {"retriever.top_k": top_k, "memory.short_window": window},
            "metrics": {"ndcg_at_10": value, "latency_p95": latency},
            "vs_best": {"is_best": significantly_worse is None, "significantly_worse": bool(significantly_worse)}}


def test_the_cheapest_configuration_tied_with_the_top_one_is_chosen():
    spec = _spec(tie_break=[{"setting": "retriever.top_k", "goal": "minimize"},
                            {"setting": "memory.short_window", "goal": "minimize"}])
    children = [_child(5, 4, 0.79, None, 0.020),    # the top one
                _child(1, 1, 0.68, True, 0.001),    # significantly worse (and fastest): out
                _child(3, 4, 0.77, False, 0.050),   # tied
                _child(3, 1, 0.76, False, 0.004),   # tied, and cheaper still
                _child(5, 1, 0.78, False, 0.002)]
    assert sweep.pick_best(children, spec)["run_id"] == "k5w4"
    best = sweep.choose(children, spec)
    assert best["run_id"] == "k3w1"
    assert [c["run_id"] for c in children if c["tied_for_best"]] == ["k5w4", "k3w4", "k3w1", "k5w1"]


def test_without_tie_break_the_top_objective_wins_and_latency_never_decides():
    spec = _spec()
    children = [_child(1, 1, 0.80, False, 0.090), _child(3, 1, 0.80, None, 0.001), _child(5, 1, 0.79, False, 0.0001)]
    children[0]["vs_best"]["is_best"] = False
    # equal objective: the earlier grid point, whatever its latency
    assert sweep.pick_best(children, spec)["run_id"] == "k1w1"
    assert sweep.choose(children, spec)["run_id"] == "k1w1"


def test_a_tie_break_on_a_metric_and_bad_ones_refused():
    spec = _spec(tie_break=[{"metric": "latency_p95", "goal": "minimize"}])
    children = [_child(5, 4, 0.79, None, 0.020), _child(3, 4, 0.78, False, 0.010)]
    assert sweep.choose(children, spec)["run_id"] == "k3w4"
    # a setting the grid does not vary breaks no tie (a config's tie_break survives --set sweep.grid=...)
    unvaried = _spec(tie_break=[{"setting": "retriever.type"}, {"setting": "memory.short_window"}])
    assert sweep.choose(children, unvaried)["run_id"] == "k5w4"  # equal windows: the higher objective
    with pytest.raises(ConfigError, match="expected {setting: KEY, goal: ...} or {metric: NAME, goal: ...}"):
        _spec(tie_break=[{"goal": "minimize"}])
