"""Layers point down, with no circles: the layer of every module is declared once (``LAYERS``) and
the import graph, read from the source with the imports inside functions, is held against it; the
core never imports the shell (flows, tasks, Prefect, the CLI); every MLflow call lives in
ragmem/tracking/."""

import re
import subprocess
import sys

import pytest

from tests import importgraph
from tests.conftest import ROOT

SHELL = {"cli.py", "cli_common.py", "cli_services.py", "scheduling.py", "orchestration.py", "prefect_server.py", "entry.py"}  # the command line and Prefect server management

#: Every module's layer, from the bottom. A module imports only modules of its own layer or below.
LAYERS: dict[str, tuple[str, ...]] = {
    # what knows nothing of evaluation: errors, text, file readers, the row schema, process plumbing
    "base": ("version", "home", "processes", "errors", "imports", "interrupts", "masking", "schema", "progress", "prompts", "forking", "parallel", "plots",
             "readers", "rubrics", "text", "text.tokenizers", "text.keywords", "text.entities", "metrics.options",
             "metrics._division"),
    # data files: examples, LoCoMo conversations, a run's journal
    "data": ("starter", "published", "loaders", "segments", "locomo", "longmemeval", "bench_data", "journal", "labels"),
    # metric math: the names (a pandas-free leaf the schema reads), the families, the statistics
    "metrics": ("metrics.names", "metrics.kernels", "metrics.batch_kernels", "metrics.scorer", "metrics.base", "metrics.verdicts",
                "metrics.classification", "metrics.coverage", "metrics.latency", "metrics.ranking",
                "metrics.generation", "metrics.rag", "metrics.rubric", "metrics.per_source", "metrics.registry", "metrics", "metrics.reliability", "metrics.estimators",
                "stats", "streaming", "paired"),
    # one config: the schema, reading, merging, validating (no domain module but the metric names)
    "config": ("sections", "sweep_settings", "settings", "config"),
    # what calls out: endpoints and their call policy, the LLM clients, agents, judges, the reference
    # agent; the machine's readiness for a config
    "clients": ("endpoints", "calls", "replies", "llm", "agents.python", "agents.replay", "agents.http", "agents.runner",
                "agents", "judges.base", "judges.keyword", "judges.llm", "judges", "mcp_memory", "reference.corpus",
                "reference.retrievers", "reference.memory", "reference.generator", "reference.agent", "reference",
                "environment"),
    # everything that reads or writes MLflow, runs read back included
    "tracking": ("tracking.store", "tracking.ui", "tracking.lifecycle", "tracking.files", "tracking.record", "tracking", "compare"),
    # the engine: the steps of a run, sweeps, memory benchmarks, gates, resume, reports, dry runs, and
    # the one preparation of a run's config, data and environment
    "engine": ("report_html", "report_pages", "pipeline", "chunks", "pairwise", "memory_layers", "memory_bench", "gates", "resume", "sweep", "judge_sweep", "bench_compare", "dryrun", "prepare", "steps",
               "engine", "relabel"),
    # the Python API
    "api": ("api", "testing", "report"),
    # the shell: the command line, Prefect (flows, tasks, the server, schedules), the package's face
    "shell": ("entry", "prefect_server", "orchestration", "scheduling", "exits", "cli_common", "cli_services", "cli", "flows", "flows.runners",
              "flows.evaluate", "flows.sweep", "flows.bench_memory", "tasks", "tasks.steps", ""),
}
_ORDER = list(LAYERS)
_LAYER_OF = {("ragmem." + m).rstrip("."): layer for layer, modules in LAYERS.items() for m in modules}
#: imports inside functions: at most a third of the 137 of 51283a7, each with a comment saying why
#: (an optional dependency, a slow import)
MAX_FUNCTION_LEVEL_IMPORTS = 45


_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\b|import\s+([\w.]+))", re.MULTILINE)


def _imports(path):
    for match in _IMPORT.finditer(path.read_text(encoding="utf-8")):
        yield match.group(1) or match.group(2)


def _core_modules():
    return [p for p in (ROOT / "ragmem").rglob("*.py") if p.name not in SHELL and "datasets" not in p.parts]


def test_every_module_has_a_layer():
    files = set(importgraph.module_files())
    assert sorted(files - set(_LAYER_OF)) == [], "add the new module to LAYERS"
    assert sorted(set(_LAYER_OF) - files) == [], "a module in LAYERS no longer exists"


def test_no_circle_and_no_import_up_a_layer():
    edges = importgraph.edges()
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
    assert importgraph.circles(graph) == []
    upward = sorted(f"{e.source} ({_LAYER_OF[e.source]}) -> {e.target} ({_LAYER_OF[e.target]}), line {e.line}"
                    for e in edges if _ORDER.index(_LAYER_OF[e.source]) < _ORDER.index(_LAYER_OF[e.target]))
    assert upward == []


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
    todo = ["ragmem.parallel", "ragmem.metrics.scorer", "ragmem.text.keywords", "ragmem.text.entities"]
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
    assert lengths["ragmem/engine.py:evaluate"] < 60 and lengths["ragmem/engine.py:sweep"] < 60
