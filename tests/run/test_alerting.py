"""Alerts (``alerts:``, :mod:`ragmem.run.alerting`): one message per failed gate naming the metric, its
value and interval and the threshold; a drift's, a failed run's, too many failed calls'; a destination
is a secret (masked to its scheme wherever ragmem writes); a URL Apprise does not know is refused when
the config is read; a destination that fails is one line, never the run's end. Delivery to a real
webhook of a scheduled window: ``tests/e2e/test_drift.py``."""

from __future__ import annotations

import json

import pytest

from ragmem.orchestration import notify as delivery
from ragmem.config import secrets
from ragmem.config.loading import RunConfig
from ragmem.errors import ConfigError
from ragmem.run import alerting

HOOK = "json://127.0.0.1:9/hook-with-a-token-inside"


def _cfg(**alerts) -> RunConfig:
    return RunConfig.from_dict({"experiment": "nightly", "alerts": {"to": [HOOK], **alerts}})


def _summary() -> dict:
    return {"run_id": "a" * 32, "tracking_uri": "sqlite:///x.db", "metrics": {"pass_rate": 0.4, "faithfulness": 0.9},
            "ci": {"pass_rate": [0.25, 0.55]}, "counts": {"n_examples": 40, "n_agent_errors": 1, "n_judge_errors": 6},
            "traces": {"window": {"since": "2026-12-05T00:00:00+00:00", "until": "2026-12-06T00:00:00+00:00"}},
            "gates": [{"metric": "pass_rate", "value": 0.4, "min": 0.8, "max": None, "passed": False},
                      {"metric": "faithfulness", "value": 0.9, "min": 0.5, "max": None, "passed": True}]}


def test_one_message_per_failed_gate_with_value_interval_and_threshold():
    (event, title, body), = alerting.messages(_cfg(), _summary())
    assert event == "gate_failed" and title == "ragmem nightly: gate failed: pass_rate"
    assert body.splitlines() == [
        "gate failed: pass_rate 0.4 < 0.8 (min)", "pass_rate 0.4000 [0.2500, 0.5500]; threshold: min 0.8",
        "experiment nightly, window 2026-12-05T00:00:00+00:00 to 2026-12-06T00:00:00+00:00",
        f"run {'a' * 32} in sqlite:///x.db; report: ragmem report aaaaaaaa"]


def test_events_not_listed_are_not_sent_and_errors_over_is_one():
    assert alerting.messages(_cfg(on=["run_failed"]), _summary()) == []
    found = alerting.messages(_cfg(on=["errors"], errors_over=0.1), _summary())
    assert [(e, t) for e, t, _ in found] == [("errors", "ragmem nightly: failed calls above 0.1")]
    assert found[0][2].startswith("15.0% of judgements failed (alerts.errors_over 0.1; 40 examples)")
    with pytest.raises(ConfigError, match="on: errors needs errors_over"):
        _cfg(on=["errors"])


def test_a_failed_run_is_one_message():
    (event, title, body), = alerting.run_failed(_cfg(), RuntimeError("the agent is down"))
    assert event == "run_failed" and title == "ragmem nightly: run failed" and "the agent is down" in body
    assert alerting.run_failed(_cfg(on=["gate_failed"]), RuntimeError("x")) == []


def test_a_destination_is_a_secret_everywhere_ragmem_writes():
    cfg = _cfg()
    assert "hook-with-a-token-inside" not in json.dumps(secrets.mask(cfg.raw))
    assert secrets.scrub(f"posting to {HOOK} failed") == "posting to json://*** failed"
    assert "hook-with-a-token-inside" not in json.dumps(secrets.protect(cfg.raw))


def test_a_url_apprise_does_not_know_is_refused_when_the_config_is_read(caplog):
    with pytest.raises(ConfigError, match=r"^alerts.to: \[1\]: nope://… is not a notification URL Apprise knows"):
        RunConfig.from_dict({"alerts": {"to": [HOOK, "nope://secret-part"]}})
    with pytest.raises(ConfigError):
        RunConfig.from_dict({"alerts": {"to": ["json://"]}})  # (Apprise knows the scheme, not the URL: it logs it)
    assert "secret-part" not in caplog.text and "Unparseable" not in caplog.text  # (Apprise's own lines: muted)
    with pytest.raises(ConfigError, match=r"prefect-block:// needs the block's name"):
        RunConfig.from_dict({"alerts": {"to": ["prefect-block://"]}})


def test_a_destination_that_fails_is_one_line_never_an_exception(caplog):
    failed = delivery.send([HOOK], "t", "b")  # (nothing listens on port 9)
    assert failed == ["alert not delivered to json://…: not delivered (the service refused or did not answer)"]
    assert "hook-with-a-token-inside" not in caplog.text and failed[0] in caplog.text


def test_the_serve_log_shows_headline_metrics_and_each_gate():
    lines = alerting.headline(_summary())
    assert "pass_rate 0.4000 [0.2500, 0.5500]" in lines and "gate faithfulness (bounds): passed" in lines
    assert "gate failed: pass_rate 0.4 < 0.8 (min)" in lines


def test_a_bare_on_key_in_yaml_is_the_setting_on():
    """YAML 1.1 reads ``on:`` as the key true: the docs' example, pasted as it stands, still sets alerts.on."""
    import yaml

    cfg = RunConfig.from_dict(yaml.safe_load(f"alerts: {{to: ['{HOOK}'], on: [run_failed, drift]}}"))
    assert cfg.alerts.on == ["run_failed", "drift"]
