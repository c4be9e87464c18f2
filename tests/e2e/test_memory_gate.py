"""CI's memory figures (issue 57): ``benchmarks/memory_gate.py`` runs the offline suite (and, with
``--tracked``, a tracked ``ragmem run``) on fresh generated examples, prints its peak PSS and fails
above the committed bound (``benchmarks/memory_bound.json``); ``.ci/run`` runs both. A bound lowered
below the figure fails it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e

GATE = ROOT / "benchmarks" / "memory_gate.py"


def test_the_bound_is_committed_with_its_reason_and_ci_runs_the_gate():
    bound = json.loads((ROOT / "benchmarks" / "memory_bound.json").read_text(encoding="utf-8"))
    assert bound["peak_pss_mb"] > 0 and bound["why"].strip()
    assert bound["measured_mb"] < bound["peak_pss_mb"] <= bound["measured_mb"] * 1.16  # the figure plus 15%
    assert bound["tracked_measured_mb"] < bound["tracked_peak_pss_mb"] <= bound["tracked_measured_mb"] * 1.16
    assert bound["tracked_why"].strip()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ".venv/bin/python benchmarks/memory_gate.py\n" in ci and ".venv/bin/python benchmarks/memory_gate.py --tracked\n" in ci


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


def test_a_tracked_runs_peak_above_the_bound_fails_the_gate_and_its_server_is_stopped(tmp_path):
    done = subprocess.run([sys.executable, str(GATE), "--tracked", "--n", "200", "--bound", "1"], capture_output=True,
                          text=True, cwd=ROOT, timeout=600, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode == 1, done.stderr[-2000:]
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("memory: a tracked ragmem run on 200 fresh examples: ") and "ABOVE the bound of 1 MB" in line, line
    assert 100 < float(line.split("peak PSS ")[1].split(" MB")[0]) < 3000  # the command's tree, measured
    assert "tracked_peak_pss_mb of benchmarks/memory_bound.json" in done.stderr
    assert _processes_under(tmp_path) == []  # its Prefect server (in the gate's own folder) stopped with it


def _processes_under(folder) -> list[int]:
    """The processes whose environment names ``folder`` (the gate's children were given TMPDIR there)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if str(folder).encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:  # (gone, or not ours)
                pass
    return found
