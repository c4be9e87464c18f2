"""Packaging that cannot drift: every package ragmem imports is declared (and nothing it does not
import), and the wheel installed without ``-e`` into a fresh environment runs the demo from another
folder (the ``wheel`` lane: ``pytest -m wheel``, a CI step of its own)."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import free_port, outside_env, ROOT

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

_OWN = {"ragmem", "flows", "tasks", "__future__"}


def _requirement_name(spec: str) -> str:
    return re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower().replace("_", "-")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _top_level_imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module.split(".")[0]
        elif (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lean_import" and node.args
              and isinstance(node.args[0], ast.Constant)):  # ragmem.runtime.imports.lean_import("sacrebleu.metrics")
            yield node.args[0].value.split(".")[0]


def _imported_distributions() -> dict[str, set[str]]:
    """Distributions (each as the set of the names that own the module) -> the files of ragmem/,
    flows/ and tasks/ that import them, module-level or not."""
    owners = importlib.metadata.packages_distributions()
    found: dict[frozenset[str], set[str]] = {}
    for folder in ("ragmem", "flows", "tasks"):
        for path in (ROOT / folder).rglob("*.py"):
            if "datasets" in path.parts:  # the scripts that built the shipped data, not installed code
                continue
            for top in _top_level_imports(path):
                if top in _OWN or top in sys.stdlib_module_names:
                    continue
                # a module of several distributions (mlflow: mlflow, mlflow-skinny, ...) is declared by any
                # of them; one not installed here (an optional extra's) by its own name
                dists = frozenset(d.lower().replace("_", "-") for d in owners.get(top, [top]))
                found.setdefault(dists, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_imported_package_is_declared_and_every_declared_one_is_imported():
    project = _project()
    required = {_requirement_name(r) for r in project["dependencies"]}
    extras = {name: {_requirement_name(r) for r in specs} for name, specs in project["optional-dependencies"].items()}
    optional = set().union(*(specs for name, specs in extras.items() if name != "test"))
    imported = _imported_distributions()
    # a package only an optional feature imports (guarded, with an error naming the extra) is in an extra
    undeclared = {"/".join(sorted(dists)): sorted(files) for dists, files in imported.items()
                  if not dists & (required | optional)}
    assert undeclared == {}, "imported but not declared in pyproject.toml"
    # every runtime dependency is imported by ragmem itself (pyarrow: by pandas, as its Parquet engine)
    unused = sorted(required - set().union(*imported) - {"pyarrow"})
    assert unused == [], "declared but never imported: move it to the test extra or drop it"
    assert not (extras["test"] & required), "a test-only package is a runtime dependency too"


def test_no_package_list_is_written_by_hand():
    """The package list is found (setup.py), so a new subpackage cannot be left out of the wheel."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "packages =" not in text
    packages = {p.parent.relative_to(ROOT).as_posix().replace("/", ".") for p in (ROOT / "ragmem").rglob("__init__.py")}
    assert "ragmem.tracking" in packages  # the one a hand-written list had missed


@pytest.mark.wheel
def test_the_wheel_installs_into_a_fresh_environment_and_runs_the_demo_from_another_folder(tmp_path):
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(ROOT), "-w", str(wheels)],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("ragmem-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    installed = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)],
                               capture_output=True, text=True, timeout=1200)
    assert installed.returncode == 0, installed.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # its own Prefect server, as a new user's first run starts (in tmp_path/server: never the user's)
    env = outside_env(tmp_path, ("PYTHON", "VIRTUAL_ENV", "MLFLOW_"), DO_NOT_TRACK="true",
                      PREFECT_SERVER_ANALYTICS_ENABLED="false", RAGMEM_HOME=str(tmp_path / "home"),
                      RAGMEM_PREFECT_PORT=str(free_port()))
    env.pop("PREFECT_API_URL", None)
    try:
        done = subprocess.run([str(bin_dir / "ragmem"), "run", str(ROOT / "configs" / "demo.yaml")], cwd=elsewhere,
                              env=env, capture_output=True, text=True, timeout=900)
    finally:
        subprocess.run([str(bin_dir / "ragmem"), "server", "stop"], cwd=elsewhere, env=env, capture_output=True,
                       text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "MLflow run" in done.stdout
    assert (tmp_path / "server" / "prefect-server.log").is_file()  # the server it started lived in the test's folder
    summary = (elsewhere / "summary.json")
    assert summary.is_file()
    # the installed package ran, not the checkout
    where = subprocess.run([str(bin_dir / "python"), "-c", "import ragmem.tracking, ragmem.flows; print(ragmem.__file__)"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
    assert where.returncode == 0 and str(env_dir) in where.stdout, where.stderr
