"""Imports are paid only by what uses them (issue 57): ``import ragmem`` loads ragmem's own two
modules and nothing else, and ``ragmem.evaluate(path, track=False)`` loads the packages the offline
suite computes with, named here, and none of the orchestration, tracking, plotting, HTTP or
dry-run code it does not use. Each case runs in a fresh interpreter (what a module loads is only
seen in one that has loaded nothing yet)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e

#: the third-party packages ``ragmem.evaluate(track=False)`` may load: the table (pandas, numpy,
#: pyarrow and theirs), the settings (pydantic, yaml), the segmenter and stopwords, the generation
#: metrics (sacrebleu and what it imports), the worker pool (cloudpickle), BLAS threads (threadpoolctl)
MAY_LOAD = {"numpy", "pandas", "pyarrow", "dateutil", "pytz", "six", "pydantic", "pydantic_core", "annotated_types",
            "typing_extensions", "typing_inspection", "yaml", "rjieba", "stopwords", "stopwordsiso", "sacrebleu",
            "portalocker", "colorama", "lxml", "tabulate", "wcwidth", "orjson", "cloudpickle", "threadpoolctl"}
#: what it must never load: orchestration, tracking, plotting, an HTTP client (an HTTP agent's or a
#: judge's), the dry run's estimates
NEVER = ("prefect", "mlflow", "matplotlib", "httpx", "rich", "click", "openai", "sklearn", "ragmem.run.dryrun",
         "ragmem.tracking.plots", "ragmem.agents.http", "ragmem.clients.openai")

_CODE = """
import json, sys
import ragmem
imported = sorted(sys.modules)
if len(sys.argv) > 1:
    ragmem.evaluate(sys.argv[1], track=False, stats={"resamples": 50})
def packages(names):
    out = set()
    for name in names:
        where = getattr(sys.modules.get(name), "__file__", None) or ""
        if "site-packages" in where and not name.startswith("_"):
            out.add(name.split(".")[0])
    return sorted(out)
print(json.dumps({"ragmem": [m for m in imported if m.startswith("ragmem")], "imported": packages(imported),
                  "loaded": sorted(sys.modules), "packages": packages(sys.modules)}))
"""


def _loaded(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _CODE, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_ragmem_loads_its_version_and_nothing_else():
    seen = _loaded()
    assert seen["ragmem"] == ["ragmem", "ragmem.version"]
    assert [p for p in seen["imported"] if p != "ragmem"] == []


def test_an_untracked_evaluation_loads_only_what_it_computes_with(tmp_path):
    rows = [{"id": f"q{i}", "query": f"什么是检索 {i}?", "generated_answer": f"检索 answer {i}",
             "reference_answer": f"检索 reference {i}", "contexts": [{"id": f"c{i}", "text": f"检索 context {i}"}],
             "relevant_context_ids": [f"c{i}"], "label": i % 2} for i in range(40)]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    seen = _loaded(str(data))
    assert set(seen["packages"]) - {"ragmem"} <= MAY_LOAD, sorted(set(seen["packages"]) - MAY_LOAD - {"ragmem"})
    loaded = set(seen["loaded"])
    assert [n for n in NEVER if n in loaded or any(m.startswith(n + ".") for m in loaded)] == []
