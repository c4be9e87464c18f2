"""Bounded work on hostile input: every setting that could exhaust memory, threads or time has an
upper bound; a YAML file of nested aliases is refused before it is expanded; a huge value is quoted
in one short line; values MLflow would refuse are refused before any work; scrubbing is linear."""

from __future__ import annotations

import pytest
import yaml

from ragmem.config import secrets
from ragmem.config.loading import MAX_CONFIG_VALUES, read_config_file, RunConfig
from ragmem.errors import ConfigError

LAUGHS = "a: &a [" + ",".join(['"lol"'] * 9) + "]\n" + "".join(
    f"{b}: &{b} [" + ",".join([f"*{a}"] * 9) + "]\n" for a, b in zip("abcdefgh", "bcdefghi")) + \
    "agent: {type: python, target: 'm:f', params: {x: *i}}\n"


def test_a_billion_laughs_file_is_refused_before_it_is_expanded(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(LAUGHS)
    assert len(LAUGHS) < 1000
    with pytest.raises(ConfigError) as found:
        read_config_file(path)
    assert str(found.value) == (f"{path}: expands to more than {MAX_CONFIG_VALUES:,} values (YAML aliases repeated "
                                f"inside each other, a 'billion laughs'?): not read")
    ordinary = tmp_path / "ok.yaml"  # aliases used as intended are fine
    ordinary.write_text("base: &b {threshold: 0.5}\njudge: *b\n")
    assert read_config_file(ordinary)["judge"] == {"threshold": 0.5}


@pytest.mark.parametrize("settings, line", [
    ({"stats": {"resamples": 1_000_000_000}}, "stats.resamples: expected an integer between 0 and 1000000, got 1000000000"),
    ({"agent": {"concurrency": 1_000_000}}, "agent.concurrency: expected an integer between 1 and 1024, got 1000000"),
    ({"judge": {"max_concurrency": 5000}}, "judge.max_concurrency: expected an integer between 1 and 1024, got 5000"),
    ({"judge": {"samples": 101}}, "judge.samples: expected an integer between 1 and 100, got 101"),
    ({"orchestration": {"workers": 100_000}}, "orchestration.workers: expected"),
    ({"experiment": "x" * 10_000_000}, "experiment: at most 500 characters, got 10,000,000"),
    ({"run_name": "r" * 300}, "run_name: at most 250 characters, got 300"),
    ({"seed": "s" * 1_000_000}, "seed: expected an integer >= 0, got 'ssssssssss"),
])
def test_a_setting_past_its_bound_is_one_short_line(settings, line):
    with pytest.raises(ConfigError) as found:
        RunConfig.from_dict(settings)
    message = str(found.value)
    assert message.startswith(line) and "\n" not in message and len(message) < 300, message[:300]


def test_a_param_mlflow_would_refuse_is_refused_before_any_work(tmp_path):
    from ragmem.run import prepare

    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"agent": {"type": "python", "target": "os:getcwd", "params": {"blob": "y" * 7000}}}))
    with pytest.raises(ConfigError, match=r"^agent\.params: 7,012 characters as an MLflow param, which keeps at most 6,000"):
        prepare.resolve(config)
    config.write_text(yaml.safe_dump({"agent": {"type": "python", "target": "os:getcwd", "params": {"blob": "y" * 7000}},
                                      "tracking": {"enabled": False}}))
    assert prepare.resolve(config).agent.params["blob"] == "y" * 7000  # untracked: nothing is logged to MLflow


def test_scrubbing_is_linear_and_a_scheme_starts_a_word():
    text = "a" * 200_000 + " http://u:pw@h/x?api_key=k " + "b" * 200_000  # (quadratic: a minute; linear: ms)
    assert secrets.scrub(text) == "a" * 200_000 + " http://u:***@h/x?api_key=*** " + "b" * 200_000
    assert secrets.scrub("see xhttp://u:pw@h/") == "see xhttp://u:***@h/"  # the scheme is the whole word
