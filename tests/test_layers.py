"""Layers point down, with no circles: the layer of every module is declared once (``LAYERS``) and
the import graph, read from the source with the imports inside functions, is held against it; the
core never imports the shell (flows, tasks, Prefect, the CLI); every MLflow call lives in
ragmem/tracking/."""

import ast
import re

from tests import importgraph
from tests.architecture import LAYERS, ORDER, SHELL, documented, layer_of, render, unit_of
from tests.conftest import ROOT

#: imports inside functions: at most a third of the 137 of 51283a7, each with a comment saying why
#: (an optional dependency, a slow import)
MAX_FUNCTION_LEVEL_IMPORTS = 45
#: modules at the top of ragmem/: the package's face (api, testing) and what every layer shares
MAX_TOP_LEVEL_MODULES = 10


_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\b|import\s+([\w.]+))", re.MULTILINE)


def _imports(path):
    for match in _IMPORT.finditer(path.read_text(encoding="utf-8")):
        yield match.group(1) or match.group(2)


def _core_modules():
    return [p for p in (ROOT / "ragmem").rglob("*.py")
            if p.relative_to(ROOT / "ragmem").parts[0] not in SHELL and "datasets" not in p.parts]


def test_every_module_has_a_layer():
    """A module's layer is its folder's: a new folder, or a new module at the top of ragmem/, is
    placed in tests/architecture.py first."""
    files = set(importgraph.module_files())
    assert sorted(m for m in files if layer_of(m) is None) == [], "place the folder in tests/architecture.py LAYERS"
    units = {unit_of(m) for m in files}
    assert sorted(u for _, _, us in LAYERS for u in us if u not in units) == [], "a unit in LAYERS no longer exists"


def test_at_most_ten_modules_at_the_top():
    top = sorted(p.name for p in (ROOT / "ragmem").glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_no_circle_and_no_import_up_a_layer():
    """Between modules and between folders: no circle; and no edge from a layer to one above it."""
    edges = importgraph.edges()
    graph: dict[str, set[str]] = {}
    folders: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        if unit_of(edge.source) != unit_of(edge.target):
            folders.setdefault(unit_of(edge.source), set()).add(unit_of(edge.target))
    assert importgraph.circles(graph) == []
    assert importgraph.circles(folders) == []
    upward = sorted(f"{e.source} ({layer_of(e.source)}) -> {e.target} ({layer_of(e.target)}), line {e.line}"
                    for e in edges if ORDER.index(layer_of(e.source)) < ORDER.index(layer_of(e.target)))
    assert upward == []


def test_the_map_in_the_docs_places_every_module():
    """docs/development.md shows the table above with every module in its folder; after adding a
    module: python -m tests.architecture"""
    assert documented() == render(), "run python -m tests.architecture"


def test_imports_inside_functions_are_few_and_each_says_why():
    inner = [e for e in importgraph.edges() if e.inside_function]
    statements = {(e.source, e.line): e for e in inner}
    silent = sorted(f"{e.source}:{e.line} -> {e.target}" for e in statements.values() if not e.commented)
    assert silent == [], "say why the import is inside the function (an optional dependency, a slow import)"
    assert len(statements) <= MAX_FUNCTION_LEVEL_IMPORTS


def test_the_scoring_workers_load_neither_pandas_nor_the_metric_families():
    """What a worker process imports to run a mapped function (the function's module, the packages on
    the way, and their module-level imports): not pandas, numpy or the metric families (about 90 MB
    in each worker process)."""
    files = importgraph.module_files()
    module_level: dict[str, set[str]] = {}
    for edge in importgraph.edges():
        if not edge.inside_function:
            module_level.setdefault(edge.source, set()).add(edge.target)
    seen: set[str] = set()
    todo = ["ragmem.runtime.parallel", "ragmem.metrics.scorer", "ragmem.text.keywords", "ragmem.text.entities"]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # the packages Python runs on the way
        todo += sorted(module_level.get(module, ()))
    assert not seen & {"ragmem.metrics.registry", "ragmem.metrics.base"}
    heavy = {m: sorted(importgraph.third_party(files[m]) & {"pandas", "numpy"}) for m in seen}
    assert {m: h for m, h in heavy.items() if h} == {}


def test_the_core_never_imports_the_shell():
    offenders = {}
    for path in _core_modules():
        bad = [m for m in _imports(path) if m.split(".")[0] in ("prefect", "flows", "tasks")
               or any(m == f"ragmem.{folder}" or m.startswith(f"ragmem.{folder}.") for folder in SHELL)]
        if bad:
            offenders[str(path.relative_to(ROOT))] = bad
    assert offenders == {}


def test_mlflow_is_called_from_one_module():
    users = sorted(str(p.relative_to(ROOT)) for p in _core_modules() + list((ROOT / "ragmem" / "cli").glob("*.py"))
                   if any(m.split(".")[0] == "mlflow" for m in _imports(p)))
    assert users and all(u.startswith("ragmem/tracking/") for u in users), users


def test_no_module_is_over_450_lines():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for folder in ("ragmem", "flows", "tasks") for p in (ROOT / folder).rglob("*.py")}
    assert {path: n for path, n in sizes.items() if n > 450} == {}


def test_only_the_run_lifecycle_sets_a_run_status():
    setters = sorted(str(p.relative_to(ROOT)) for folder in ("ragmem", "flows", "tasks")
                     for p in (ROOT / folder).rglob("*.py") if "set_terminated" in p.read_text(encoding="utf-8"))
    assert setters == ["ragmem/tracking/store.py"]  # Tracker._terminate, called by lifecycle.py only


def _function_lengths():
    import ast

    for folder in ("ragmem", "flows", "tasks"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{path.relative_to(ROOT)}:{node.name}", node.end_lineno - node.lineno + 1


def test_functions_are_short_and_the_engine_reads_as_the_pipeline():
    lengths = dict(_function_lengths())
    assert {name: n for name, n in lengths.items() if n > 80} == {}
    assert lengths["ragmem/run/engine.py:evaluate"] < 60 and lengths["ragmem/run/engine.py:sweep"] < 60


def test_the_tests_mirror_the_package():
    """A folder of tests/ is a folder of ragmem/ (its tests) or e2e/ (whole files that run the command
    in a subprocess or need a server); at the top of tests/ only the package's face and the project's
    own checks (api, layers, docs, packaging)."""
    folders = {p.parent.name for p in (ROOT / "tests").rglob("test_*.py") if p.parent != ROOT / "tests"}
    package = {p.name for p in (ROOT / "ragmem").iterdir() if (p / "__init__.py").is_file()}
    assert sorted(folders - package - {"e2e"}) == []
    top = sorted(p.stem for p in (ROOT / "tests").glob("test_*.py"))
    assert top == ["test_api", "test_docs", "test_layers", "test_packaging"]
    # the end-to-end tests are in e2e/ and nowhere else: every file there is marked whole, no test
    # outside it is marked one by one
    for path in (ROOT / "tests").rglob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        marked = [node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                  and any(ast.unparse(d) == "pytest.mark.e2e" for d in node.decorator_list)]
        whole = any(isinstance(node, ast.Assign) and ast.unparse(node) == "pytestmark = pytest.mark.e2e" for node in tree.body)
        where = path.relative_to(ROOT)
        assert whole == (path.parent.name == "e2e"), f"{where}: pytestmark = pytest.mark.e2e belongs to the files of tests/e2e/"
        assert path.parent.name == "e2e" or marked == [], f"{where}: end-to-end tests {marked} belong in tests/e2e/"
