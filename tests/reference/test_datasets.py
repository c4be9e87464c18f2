"""The shipped datasets (ragmem/datasets/*.json) are what their builders write, and importing a builder
writes nothing. (The suite collects ragmem/ for doctests: builders that wrote at import rewrote the
shipped files during every test run, and two pytest workers collecting at once read one half-written:
a JSONDecodeError at collection, seen in CI's wheel lane.)"""

from __future__ import annotations

import importlib

import pytest

from tests.conftest import ROOT

DATASETS = ROOT / "ragmem" / "datasets"
#: each builder and the files it writes, in the order they run (build_sweep reads build_reference's files)
BUILDERS = {"build_demo": ["demo_bilingual.json"], "build_reference": ["reference_corpus.json", "reference_eval.json"],
            "build_sweep": ["sweep_corpus.json", "sweep_eval.json"]}


def test_importing_a_builder_writes_nothing():
    before = {p.name: p.stat().st_mtime_ns for p in DATASETS.glob("*.json")}
    for name in BUILDERS:
        importlib.import_module(f"ragmem.datasets.{name}")
    assert {p.name: p.stat().st_mtime_ns for p in DATASETS.glob("*.json")} == before


def test_each_builder_writes_the_shipped_files_byte_for_byte(tmp_path, monkeypatch, capsys):
    for name, files in BUILDERS.items():
        module = importlib.import_module(f"ragmem.datasets.{name}")
        monkeypatch.setattr(module, "HERE", tmp_path)
        module.main()
        for file in files:
            assert (tmp_path / file).read_bytes() == (DATASETS / file).read_bytes(), f"{name} wrote another {file}"
    assert capsys.readouterr().out.split("\n")[:3] == ["36 9", "24 64 6", "60 88"]  # (examples, wrong ones) as each prints


@pytest.mark.parametrize("name", list(BUILDERS))
def test_a_builder_reads_and_writes_beside_itself(name):
    assert importlib.import_module(f"ragmem.datasets.{name}").HERE == DATASETS
