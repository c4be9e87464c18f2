"""CI's memory figure (issue 57): ``benchmarks/memory_gate.py`` runs the offline suite on fresh
generated examples, prints its peak PSS and fails above the committed bound
(``benchmarks/memory_bound.json``); ``.ci/run`` runs it. A bound lowered below the figure fails it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e

GATE = ROOT / "benchmarks" / "memory_gate.py"


def test_the_bound_is_committed_with_its_reason_and_ci_runs_the_gate():
    bound = json.loads((ROOT / "benchmarks" / "memory_bound.json").read_text(encoding="utf-8"))
    assert bound["peak_pss_mb"] > 0 and bound["why"].strip()
    assert bound["measured_mb"] < bound["peak_pss_mb"] <= bound["measured_mb"] * 1.16  # the figure plus 15%
    assert ".venv/bin/python benchmarks/memory_gate.py" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.parametrize("bound,code,said", [("1", 1, "ABOVE the bound of 1 MB"), ("100000", 0, "within the bound of 100000 MB")])
def test_a_peak_above_the_bound_fails_the_gate(bound, code, said):
    done = subprocess.run([sys.executable, str(GATE), "--n", "200", "--bound", bound], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert done.returncode == code, done.stderr[-2000:]
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("memory: the offline suite on 200 fresh examples: ") and said in line, line
    peak = float(line.split("peak PSS ")[1].split(" MB")[0])
    assert 50 < peak < 2000  # a figure measured, not a placeholder
    if code:
        assert "benchmarks/memory_bound.json" in done.stderr and "raise the bound in a commit that says why" in done.stderr
