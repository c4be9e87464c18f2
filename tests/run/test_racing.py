"""A racing sweep's engine side (:mod:`ragmem.run.racing`): the seeded order keeps a session's turns
together and in order; settings a race cannot run are refused before any call, one line each; an
interrupted race offers the same command, never a --resume it would refuse."""

from __future__ import annotations

import re

import pytest

from ragmem import exits
from ragmem.config.loading import resolve_config, RunConfig
from ragmem.errors import ConfigError
from ragmem.run import prepare, racing
from ragmem.schema import Example
from tests.conftest import ROOT


def test_the_race_order_shuffles_sessions_and_keeps_each_sessions_turns_in_order():
    examples = [Example(f"e{i}", f"q{i}", None, session_id=f"s{i // 3}" if i < 9 else None) for i in range(20)]
    ordered = racing.order(examples, seed=7)
    assert sorted(e.id for e in ordered) == sorted(e.id for e in examples) and ordered != examples
    assert racing.order(examples, seed=7) == ordered  # seeded
    for session in ("s0", "s1", "s2"):
        at = [i for i, e in enumerate(ordered) if e.session_id == session]
        assert at == list(range(at[0], at[0] + 3))  # together
        assert [ordered[i].id for i in at] == sorted(ordered[i].id for i in at)  # in their order


@pytest.mark.parametrize("extra, message", [
    ({"sweep": {"objective": {"metric": "avg_latency", "goal": "minimize"}}},
     "sweep.objective.metric: avg_latency has no per-example score in [0, 1]"),
    ({"sweep": {"grid": {"data.chunk_size": [1000, 2000]}}}, "the grid may not vary data.*"),
    ({"orchestration": {"task_runner": "dask"}}, "orchestration.task_runner dask is not supported"),
])
def test_settings_a_race_cannot_run_are_refused_before_any_call(extra, message):
    config = resolve_config(ROOT / "configs" / "sweep_retriever.yaml", extra={"sweep": {"method": "race"}})
    for key, value in extra.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) else value
    with pytest.raises(ConfigError, match=re.escape(message)):
        prepare.sweep_plan(RunConfig.from_dict(config), load=False)


def test_an_interrupted_race_offers_the_same_command_not_a_resume(capsys):
    stopped = KeyboardInterrupt()
    stopped.ragmem_progress = (None, 3, 18, racing.NOT_RESUMED)  # type: ignore[attr-defined]  # (as the engine sets it)
    argv = ["sweep", "s.yaml", "--set", "sweep.method=race"]
    assert exits.finish(stopped, argv) == 130
    assert capsys.readouterr().err == (
        "interrupted: 3 of 18 configurations done (a race is not resumed: run it again; the judge cache keeps what "
        "it paid for); run the same command again: ragmem sweep s.yaml --set sweep.method=race\n")
