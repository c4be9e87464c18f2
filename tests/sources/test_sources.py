"""Trace sources behind one door (:mod:`ragmem.sources`): the settings choose the source from one
registry, and a third source is one class and one registry line, read into a run's data as the
built-in ones are."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Iterator

import pytest

from ragmem import sources
from ragmem.config.loading import RunConfig
from ragmem.config.trace_settings import TracesSettings
from ragmem.data.spans import Span, Trace
from ragmem.errors import ConfigError
from ragmem.run import traffic
from tests import traffic as planned


def _cfg(**traces) -> RunConfig:
    return RunConfig.from_dict({"data": {"traces": traces}, "tracking": {"enabled": False}})


def test_the_settings_choose_the_source():
    experiment = sources.source_for(_cfg(experiment="app"))
    files = sources.source_for(_cfg(files=["a.json", "b.json"]))
    assert (experiment.kind, experiment.where, experiment.timed) == ("mlflow", "experiment 'app'", True)
    assert (files.kind, files.where, files.timed) == ("otlp", "the files a.json, b.json", False)
    with pytest.raises(ConfigError, match="data.traces: name where the traces are"):
        sources.source_for(_cfg())


class Exported:
    """A source of a test's own: traces exported by another tool, here written by hand."""

    kind, timed = "exported", False

    def __init__(self, settings: TracesSettings, cfg: RunConfig):
        self.settings = settings

    @staticmethod
    def claims(settings: TracesSettings) -> bool:
        return any(f.endswith(".exported") for f in settings.files)

    @property
    def where(self) -> str:
        return "the exported traces"

    def check(self) -> None:
        pass

    def read(self, since: datetime | None, until: datetime | None) -> Iterator[Trace]:
        for i in range(3):
            root = Span(f"s{i}", None, "agent", "CHAIN", i * 10**9, i * 10**9 + 2_000_000, inputs={"query": f"q{i}?"},
                        outputs={"answer": f"a{i}"})
            yield Trace(f"tr-{i}", i * 1000, [root], session_id=f"s{i}")


def test_a_third_source_is_one_class_and_one_registry_line(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(sources, "SOURCES", (Exported, *sources.SOURCES))  # the registry line
    cfg, _ = traffic.as_data(_cfg(files=["app.exported"]))
    [data] = cfg.data.files
    records = [json.loads(line) for line in open(data.path, encoding="utf-8")]
    assert [(r["query"], r["answer"], r["session_id"]) for r in records] == \
        [("q0?", "a0", "s0"), ("q1?", "a1", "s1"), ("q2?", "a2", "s2")]


def test_the_otlp_source_reads_its_files_within_the_limit(tmp_path):
    path = planned.write_otlp(tmp_path / "spans.json", planned.plan(6, raised=0))
    source = sources.source_for(_cfg(files=[str(path), str(path)], max=8))
    assert len(list(source.read(None, None))) == 8  # six from the first file, two from the second
