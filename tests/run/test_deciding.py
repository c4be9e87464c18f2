"""Gates that stop judging once decided (``gates.stop_when_decided``, ``--stop-when-decided``): a run
whose pass rate is far from its gate stops early with the exit the full run gives; one near its gate
judges every example; a gate with no sequence says so; without the option nothing changes."""

from __future__ import annotations

import json
import logging

import pytest

import ragmem
from ragmem.config.loading import RunConfig
from ragmem.errors import ConfigError
from ragmem.run.deciding import Decider


def _data(tmp_path, passing_every: int, n: int = 1000) -> str:
    """``n`` replayed examples, the answer right on all but every ``passing_every``-th one (or, with a
    negative number, right only there)."""
    def right(i):
        return (i % abs(passing_every) != 0) if passing_every > 0 else (i % -passing_every == 0)

    rows = [{"id": f"q{i}", "query": f"where is site {i}?", "reference_answer": f"site {i} lies north of the river",
             "generated_answer": f"site {i} lies north of the river" if right(i) else "no idea at all",
             "contexts": [f"site {i} lies north of the river, by the old mill"]} for i in range(n)]
    path = tmp_path / f"sites{passing_every}.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("every, passes", [(10, True), (-10, False)], ids=["far above", "far below"])
def test_a_pass_rate_far_from_its_gate_stops_early_with_the_full_runs_verdict(tmp_path, every, passes):
    data, gate = _data(tmp_path, every), {"pass_rate": {"min": 0.5}}
    full = ragmem.evaluate(data, track=False, metrics=["pass_rate"], gates=gate)
    early = ragmem.evaluate(data, track=False, metrics=["pass_rate"], gates={**gate, "stop_when_decided": True})
    assert [g["passed"] for g in full.summary["gates"]] == [g["passed"] for g in early.summary["gates"]] == [passes]
    decided = early.summary["decided"]
    assert decided["decided"] and decided["of"] == 1000 and decided["after"] < 300
    assert early.summary["n_examples"] == decided["after"] == len(early.table)
    low, high = decided["gates"]["pass_rate"]
    assert (low > 0.5) if passes else (high < 0.5)
    [line] = [n for n in early.summary["notes"] if n.startswith("decided after")]
    assert line.endswith(f"{1000 - decided['after']:,} examples not asked")
    assert "decided" not in full.summary


def test_a_pass_rate_near_its_gate_judges_every_example(tmp_path):
    rows = json.loads(open(_data(tmp_path, 2), encoding="utf-8").read())  # right on every other one: 0.5
    result = ragmem.evaluate(rows, track=False, metrics=["pass_rate"],
                             gates={"pass_rate": {"min": 0.49}, "stop_when_decided": True})
    assert result.summary["n_examples"] == 1000 and "decided" not in result.summary


@pytest.mark.parametrize("every, passes", [(10, True), (-10, False)], ids=["far above", "far below"])
def test_a_scored_metric_far_from_its_gate_stops_early_with_the_full_runs_verdict(tmp_path, every, passes):
    """A gate on a mean of per-example scores (here the answer's coverage of the reference, scored on
    each batch as the run scores) is decided as a pass rate is, with the full run's verdict and value."""
    data, gate = _data(tmp_path, every), {"avg_coverage": {"min": 0.5}, "pass_rate": {"min": 0.5}}
    full = ragmem.evaluate(data, track=False, metrics=["pass_rate", "avg_coverage"], gates=gate)
    early = ragmem.evaluate(data, track=False, metrics=["pass_rate", "avg_coverage"],
                            gates={**gate, "stop_when_decided": True})
    assert [g["passed"] for g in full.summary["gates"]] == [g["passed"] for g in early.summary["gates"]] == [passes] * 2
    decided = early.summary["decided"]
    assert decided["decided"] and decided["after"] < 300 and set(decided["gates"]) == {"avg_coverage", "pass_rate"}
    low, high = decided["gates"]["avg_coverage"]
    assert (low > 0.5) if passes else (high < 0.5)
    judged = early.table["coverage"].astype(float)  # the sequence followed the scores the run reports
    assert low <= judged.mean() <= high and len(judged) == decided["after"]
    assert early.summary["metrics"]["avg_coverage"] == pytest.approx(judged.mean())


def test_a_corpus_figure_has_no_sequence():
    """BLEU is sacrebleu's corpus figure, not the mean of the sentences' scores: no sequence follows it."""
    decider = Decider.of(RunConfig.from_dict({"gates": {"bleu": {"min": 0.5}, "stop_when_decided": True}}), 100)
    assert decider is not None and decider.undecidable == ["bleu: not a mean of per-example scores in [0, 1]"]


def test_a_gate_with_no_sequence_says_why_and_the_run_judges_every_example(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="ragmem"):
        result = ragmem.evaluate(_data(tmp_path, 10, n=100), track=False, metrics=["pass_rate", "avg_latency"],
                                 gates={"pass_rate": {"min": 0.5}, "avg_latency": {"max": 5.0}, "stop_when_decided": True})
    assert result.summary["n_examples"] == 100 and "decided" not in result.summary
    assert ("gates.stop_when_decided: no sequence as the run judges for avg_latency: not a mean of per-example "
            "scores in [0, 1]: every example is judged") in caplog.text


def test_an_llm_judged_gate_without_the_judge_cache_has_no_sequence():
    cfg = RunConfig.from_dict({"judge": {"type": "llm", "model": "m", "base_url": "http://127.0.0.1:9/v1", "cache": False},
                               "metrics": ["faithfulness"], "gates": {"faithfulness": {"min": 0.5}, "stop_when_decided": True}})
    decider = Decider.of(cfg, 100)
    assert decider is not None and not decider.gates
    assert decider.undecidable == ["faithfulness: judge.cache false would ask its judge twice (set judge.cache true)"]


def test_the_setting_and_a_bad_value():
    cfg = RunConfig.from_dict({"gates": {"pass_rate": {"min": 0.5}, "stop_when_decided": True}})
    assert cfg.stops_when_decided and list(cfg.gates) == ["pass_rate"]
    assert RunConfig.from_dict(cfg.raw).stops_when_decided  # (the flows take the config as plain data)
    with pytest.raises(ConfigError, match="^gates.stop_when_decided: expected true or false, got 'yes'$"):
        RunConfig.from_dict({"gates": {"stop_when_decided": "yes"}})
