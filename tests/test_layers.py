"""Layers point down: the core never imports the shell (flows, tasks, Prefect, the CLI), and every
MLflow call lives in ragmem/tracking/."""

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SHELL = {"cli.py", "cli_services.py", "scheduling.py", "orchestration.py"}  # the command line and Prefect server management


_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\b|import\s+([\w.]+))", re.MULTILINE)


def _imports(path):
    # (a regular expression rather than ast.parse: CPython 3.11's parser raised "AST constructor
    # recursion depth mismatch" here while other threads of the suite were running)
    for match in _IMPORT.finditer(path.read_text(encoding="utf-8")):
        yield match.group(1) or match.group(2)


def _core_modules():
    return [p for p in (ROOT / "ragmem").rglob("*.py") if p.name not in SHELL and "datasets" not in p.parts]


def test_the_core_never_imports_the_shell():
    offenders = {}
    for path in _core_modules():
        bad = [m for m in _imports(path) if m.split(".")[0] in ("prefect", "flows", "tasks")
               or m.startswith(("ragmem.flows", "ragmem.tasks", "ragmem.cli", "ragmem.scheduling",
                                "ragmem.orchestration"))]
        if bad:
            offenders[str(path.relative_to(ROOT))] = bad
    assert offenders == {}


def test_mlflow_is_called_from_one_module():
    users = sorted(str(p.relative_to(ROOT)) for p in _core_modules() + [ROOT / "ragmem" / "cli.py"]
                   if any(m.split(".")[0] == "mlflow" for m in _imports(p)))
    assert users and all(u.startswith("ragmem/tracking/") for u in users), users


@pytest.mark.e2e  # a fresh interpreter outside the checkout sees only what is installed
def test_flows_and_tasks_install_under_the_ragmem_namespace(tmp_path):
    code = ("import importlib.util, ragmem.flows.evaluate, ragmem.tasks.steps; "
            "print(importlib.util.find_spec('flows'), importlib.util.find_spec('tasks'), "
            "ragmem.flows.evaluate.__file__, ragmem.tasks.steps.__file__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "None", str(ROOT / "flows" / "evaluate.py"), str(ROOT / "tasks" / "steps.py")]


def test_no_module_is_over_about_400_lines():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for folder in ("ragmem", "flows", "tasks") for p in (ROOT / folder).rglob("*.py")}
    assert {path: n for path, n in sizes.items() if n > 420} == {}


def test_only_the_run_lifecycle_sets_a_run_status():
    setters = sorted(str(p.relative_to(ROOT)) for folder in ("ragmem", "flows", "tasks")
                     for p in (ROOT / folder).rglob("*.py") if "set_terminated" in p.read_text(encoding="utf-8"))
    assert setters == ["ragmem/tracking/store.py"]  # Tracker._terminate, called by lifecycle.py only


def test_the_scoring_workers_load_neither_pandas_nor_the_metric_families():
    # each mapped function's module is what a worker process imports (pandas and the families:
    # about 90 MB in each worker); the registry is still there for everyone else
    code = ("import sys; from ragmem.parallel import chunks; from ragmem.metrics.scorer import score_pairs; "
            "from ragmem.text.keywords import keyword_sets; from ragmem.text.entities import offline_entities; "
            "loaded = sorted(m for m in ('pandas', 'numpy', 'ragmem.metrics.registry', 'ragmem.metrics.base') "
            "if m in sys.modules); from ragmem.metrics import FAMILIES; print(loaded, len(FAMILIES) > 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "True"]
