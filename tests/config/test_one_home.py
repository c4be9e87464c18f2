"""Defaults and section lists declared once, in the schema: what rebuilds a run's settings from its
params (``ragmem labels import``, the reports) reads the schema's defaults, and the reference agent's
sections are the schema's, handed to it validated once."""

from __future__ import annotations

import math

import pytest

from ragmem.config import settings as schema
from ragmem.config.loading import RunConfig
from ragmem.run.relabel import _settings


def test_a_setting_a_run_did_not_log_takes_the_schemas_default():
    rebuilt, defaults = _settings({}), RunConfig.from_dict({})
    assert (rebuilt.judge.type, rebuilt.judge.threshold, rebuilt.judge.samples, rebuilt.judge.temperature) == \
        (defaults.judge.type, defaults.judge.threshold, defaults.judge.samples, defaults.judge.temperature)
    assert rebuilt.min_kappa == defaults.judge.min_kappa
    assert (rebuilt.resamples, rebuilt.confidence, rebuilt.seed) == \
        (defaults.stats.resamples, defaults.stats.confidence, defaults.seed)
    assert math.isnan(rebuilt.zero_division) and math.isnan(defaults.zero_division)
    # and what a run logged wins
    logged = _settings({"judge.threshold": "0.55", "zero_division": "0", "judge.samples": "3"})
    assert (logged.judge.threshold, logged.zero_division, logged.judge.samples) == (0.55, 0.0, 3)
    assert schema.run_setting({}, "report.min_coverage") == defaults.report.min_coverage


def test_the_reference_agents_sections_are_the_schemas_and_reach_it_validated_once(monkeypatch):
    from ragmem import agents
    from ragmem.reference import agent as reference

    assert schema.REFERENCE_SECTIONS == tuple(schema.ReferenceSettings.model_fields)
    assert set(schema.REFERENCE_ONLY) == set(schema.REFERENCE_SECTIONS) - {"embeddings", "keywords"}
    cfg = RunConfig.from_dict({"agent": {"type": "reference"}, "retriever": {"top_k": 2}})

    def validated_again(*args, **kwargs):
        raise AssertionError("the reference agent's sections were validated again")

    monkeypatch.setattr(reference, "as_section", validated_again)
    built = agents.build_agent(cfg)
    assert isinstance(built.instance, reference.ReferenceAgent) and built.instance.top_k == 2
    with pytest.raises(AssertionError, match="validated again"):  # (a dict is still validated)
        reference.ReferenceAgent({"retriever": {"top_k": 2}})
