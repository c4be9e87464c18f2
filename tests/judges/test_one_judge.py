"""The judge as one concept: its kind is read in one place (``JudgeSettings.asks_llm``), every
command reaches the verdict judges and the LLM client through :mod:`ragmem.judges`, and who judged
a run is said from its params there."""

from __future__ import annotations

import re

import pytest

from ragmem import judges
from ragmem.config.settings import JudgeSettings
from ragmem.errors import RagmemError
from tests.conftest import ROOT

#: a test of the judge's kind: ``judge.type == "llm"``, ``params.get("judge.type") != "keyword"``, ...
KIND = re.compile(r"""(\.type|"judge\.type"\))\s*[!=]=\s*["'](llm|keyword)["']""")


def test_the_judges_kind_is_read_in_one_place():
    found = [(str(p.relative_to(ROOT)), line.strip())
             for folder in ("ragmem", "flows", "tasks") for p in sorted((ROOT / folder).rglob("*.py"))
             for line in p.read_text(encoding="utf-8").splitlines() if KIND.search(line)]
    assert found == [("ragmem/config/settings.py", 'return self.type == "llm"')]  # (JudgeSettings.asks_llm)


def test_a_command_that_needs_an_llm_gets_its_one_line_and_who_judged_is_said_from_the_params():
    with pytest.raises(RagmemError, match="^generate: needs an LLM$"):
        judges.llm_client(JudgeSettings(), "generate: needs an LLM")
    judges.require_llm(JudgeSettings(type="llm", model="m"), "not raised")
    assert judges.source_of({"judge.type": "llm", "judge.model": "qwen2.5:1.5b"}) == ("LLM_JUDGE", "qwen2.5:1.5b")
    assert judges.source_of({}) == ("CODE", "ragmem keyword judge")
