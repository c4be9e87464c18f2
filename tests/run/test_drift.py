"""``gates.<metric>.drift`` on a window's run (:mod:`ragmem.run.drift`): the windows before it read
from their runs' tags, one whose tag cannot be read left out and counted (never the reason a window
fails), ``drift.since`` leaving out the older ones, the gate's line; and the checks before any work."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from ragmem.config.loading import RunConfig
from ragmem.errors import ConfigError
from ragmem.run import drift, gates, windows


def _cfg(**gate) -> RunConfig:
    return RunConfig.from_dict({"data": {"traces": {"experiment": "app", "tracking_uri": "sqlite:///app.db",
                                                    "since": "2026-12-05T00:00:00Z"}},
                                "metrics": ["faithfulness"], "gates": {"faithfulness": gate}})


def _run(run_id: str, since: str, tag: str | None):
    tags = {windows.SINCE: since, **({drift.TAG: tag} if tag is not None else {})}
    return SimpleNamespace(info=SimpleNamespace(run_id=run_id), data=SimpleNamespace(tags=tags))


def _history(monkeypatch, runs):
    monkeypatch.setattr(windows, "finished", lambda cfg, most: list(reversed(runs)))  # (newest first)


def _table(scores, sessions):
    return pd.DataFrame({"id": [str(i) for i in range(len(scores))], "faithfulness": scores, "cluster": sessions})


def test_the_windows_before_are_read_back_and_a_drop_fails_the_gate(monkeypatch):
    good = json.dumps({"faithfulness": [10, 0.9, 0.4]})
    _history(monkeypatch, [_run(f"r{i}", f"2026-12-0{i + 1}T00:00:00Z", good) for i in range(4)]
             + [_run("bad", "2026-12-05T00:00:00Z", "{not json"), _run("odd", "2026-12-05T00:00:00Z",
                                                                       json.dumps({"faithfulness": [0, "x", -1]}))])
    cfg = _cfg(drift={"max_drop": 0.2})
    table = _table([0.5, 0.3] * 10, [f"s{i // 2}" for i in range(20)])  # 10 sessions at 0.4
    summary = {"traces": {"previous": None}}
    drift.summarize(cfg, summary, table, "this")
    d = summary["traces"]["drift"]["faithfulness"]
    assert d["window"] == [10, pytest.approx(0.4), pytest.approx(0.0)]
    assert d["windows"] == 5 and d["left_out"] == 2 and d["alarmed"] and d["over"] == 1
    assert summary["traces"]["volume"] == {"units": 10, "unit": "sessions", "min_detectable": {}}
    assert json.loads(summary["traces"]["tags"][drift.TAG]) == {"faithfulness": d["window"]}
    failed = gates.drifts({"faithfulness": 0.4}, summary["traces"])
    assert [g.passed for g in failed] == [False]
    assert failed[0].line().startswith("drift: faithfulness down 0.50 over the last window (evidence ")


def test_since_leaves_out_the_windows_before_it(monkeypatch):
    good = json.dumps({"faithfulness": [10, 0.9, 0.4]})
    _history(monkeypatch, [_run(f"r{i}", f"2026-12-0{i + 1}T00:00:00Z", good) for i in range(4)])
    cfg = _cfg(drift={"max_drop": 0.2, "since": "2026-12-03T00:00:00Z"})
    summary = {"traces": {"previous": None}}
    drift.summarize(cfg, summary, _table([0.4] * 10, [f"s{i}" for i in range(10)]), "this")
    d = summary["traces"]["drift"]["faithfulness"]
    assert d["windows"] == 3 and d["drop"] is None and not d["alarmed"]  # 2 kept + this one: still the baseline
    line = gates.passed_line(gates.as_dicts(gates.drifts({}, summary["traces"]))[0])
    assert line == "drift: faithfulness watched once 3 windows are seen (3 so far: no change looked for yet)"


def test_a_window_without_the_score_fails_its_drift_gate(monkeypatch):
    _history(monkeypatch, [])
    summary = {"traces": {"previous": None}}
    drift.summarize(_cfg(drift={"max_drop": 0.2}), summary, _table([float("nan")] * 3, ["a", "b", "c"]), "this")
    (gate,) = gates.drifts({}, summary["traces"])
    assert not gate.passed and gate.line() == "drift: faithfulness could not be computed in this window (null)"


def test_a_threshold_the_volume_cannot_see_is_said():
    cfg = _cfg(max_regression=0.05, drift={"max_drop": 0.1})
    volume = {"units": 10, "unit": "sessions", "min_detectable": {"faithfulness": 0.355}}
    assert drift.undetectable_lines(cfg, volume) == [
        "faithfulness: max_regression 0.05 is below what 10 sessions can detect (0.355): the drift gate watches "
        "across windows"]
    assert drift.undetectable_lines(_cfg(max_regression=0.5), volume) == []
    assert "see gates.faithfulness.drift" in drift.undetectable_lines(_cfg(max_regression=0.05), volume)[0]
    assert drift.undetectable_lines(cfg, {"units": 10, "min_detectable": {"faithfulness": "x"}}) == []


@pytest.mark.parametrize("config, message", [
    ({"data": {"files": [{"path": "x.jsonl"}]}, "gates": {"pass_rate": {"drift": {"max_drop": 0.1}}}},
     "gates.pass_rate.drift: watches windows of traffic: needs data.traces.experiment"),
    ({"data": {"traces": {"experiment": "app"}}, "gates": {"pass_rate": {"drift": {"max_drop": 0}}}},
     "max_drop"),
    ({"data": {"traces": {"experiment": "app"}}, "gates": {"pass_rate": {"drift": {"max_drop": 0.1, "since": "soon"}}}},
     "expected an ISO time"),
])
def test_drift_settings_are_checked(config, message):
    with pytest.raises(Exception, match=message):
        RunConfig.from_dict(config)


def test_a_drift_on_a_figure_of_the_whole_window_is_refused():
    with pytest.raises(ConfigError, match="gates.f1.drift: f1 has no per-example score"):
        gates.check_names({"f1": {"drift": {"max_drop": 0.1}}}, (10,))


def test_a_drift_gate_that_passed_says_what_it_saw(monkeypatch):
    kept = json.dumps({"faithfulness": [10, 0.9, 0.4]})
    _history(monkeypatch, [_run(f"r{i}", f"2026-12-0{i + 1}T00:00:00Z", kept) for i in range(3)])
    summary = {"traces": {"previous": None}}
    drift.summarize(_cfg(drift={"max_drop": 0.2}), summary, _table([1.0, 0.7] * 10, [f"s{i // 2}" for i in range(20)]),
                    "this")
    (gate,) = gates.as_dicts(gates.drifts({}, summary["traces"]))
    assert gate["passed"]
    assert gates.passed_line(gate) == ("drift: faithfulness evidence 0.0527 < 20 over 4 windows (no sustained drop of "
                                       "0.2 seen; the likeliest change: down 0.050 over the last window)")
