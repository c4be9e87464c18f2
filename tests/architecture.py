"""ragmem's layers, declared once: every folder of the package (and ``flows/``, ``tasks/``) with its
layer, from the bottom. A module's layer is its folder's; a module at the top of ``ragmem/`` is
named on its own. ``tests/test_layers.py`` holds the import graph against this table, and the map
in ``docs/development.md`` is written from it:

    python -m tests.architecture      # rewrites the map between its two markers
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (layer, what it holds, its folders or top-level modules), from the bottom. A module imports only
#: from its own layer or below, and no two folders import each other.
LAYERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("base", "what every layer may import: the error tree, the row types, the version",
     ("errors", "schema", "version")),
    ("runtime", "the process: the home, other processes, interrupts, progress, the process pools",
     ("runtime",)),
    ("text", "tokenizers, keywords, entities", ("text",)),
    ("prompts", "the judge's prompt templates and the rubrics", ("prompts",)),
    ("data", "records in: file readers, loaders, segments, published datasets, file hashes", ("data",)),
    ("metrics", "the metric math: names, kernels, one module per family, the registry", ("metrics",)),
    ("stats", "intervals from per-example statistics, a run's statistics chunk by chunk, two runs paired",
     ("stats",)),
    ("config", "one validated config: the schema, its sections, reading and merging, secrets", ("config",)),
    ("clients", "what calls out: endpoints and their breakers, the call policy, the LLM clients, replies",
     ("clients",)),
    ("components", "what a run is made of: agents, judges, the reference RAG and memory agent",
     ("agents", "judges", "reference")),
    ("testsets", "test sets generated from a corpus: documents read, offline probes, LLM-written questions and their checks",
     ("testsets",)),
    ("memory", "memory benchmarks (LoCoMo, LongMemEval) and the memory layers they run", ("memory",)),
    ("tracking", "every MLflow call, the tracking URI, runs read back, plots", ("tracking",)),
    ("sources", "where production traces are read from: one module a source, chosen by one registry", ("sources",)),
    ("report", "the terminal tables and the HTML report", ("report",)),
    ("run", "the engine: a run's preparation, steps, batches, summary, sweeps, gates, resume",
     ("run",)),
    ("api", "the Python API and how a command ends", ("api", "testing", "exits")),
    ("orchestration", "Prefect: which API, the managed server, the tasks and flows",
     ("orchestration", "tasks", "flows")),
    ("cli", "the ragmem command", ("cli",)),
    ("package", "import ragmem", ("",)),
)
ORDER = [layer for layer, _, _ in LAYERS]
LAYER_OF_UNIT = {unit: layer for layer, _, units in LAYERS for unit in units}
#: the folders of the shell: the command line and Prefect (the core imports none of them)
SHELL = ("cli", "orchestration", "tasks", "flows")


def unit_of(module: str) -> str:
    """The folder (or top-level module) that holds ``module``: ``ragmem.run.engine`` -> ``run``,
    ``ragmem.errors`` -> ``errors``, ``ragmem`` -> ``""``."""
    parts = module.split(".")[1:]
    return parts[0] if parts else ""


def layer_of(module: str) -> str | None:
    return LAYER_OF_UNIT.get(unit_of(module))


def _first_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    line = " ".join(doc.split("\n\n")[0].split())
    return line.split(". ")[0].rstrip(".:")


def render() -> str:
    """The map of docs/development.md: every layer, its folders and their modules, each with the first
    sentence of its docstring."""
    from tests.importgraph import module_files

    files = module_files()
    out = ["| layer | folder | modules |", "|---|---|---|"]
    for layer, holds, units in LAYERS:
        for unit in units:
            modules = sorted(m for m in files if unit_of(m) == unit and (unit or m == "ragmem"))
            if unit == "" or (ROOT / "ragmem" / f"{unit}.py").is_file():
                folder = "`ragmem/__init__.py`" if unit == "" else f"`ragmem/{unit}.py`"
                cell = _first_line(files[modules[0]]) if modules else ""
            else:
                folder = f"`{unit}/`" if unit in ("tasks", "flows") else f"`ragmem/{unit}/`"
                names = [m.rsplit(".", 1)[-1] if m.count(".") > 1 else "__init__" for m in modules]
                cell = ", ".join(f"`{n}`" for n in names)
            out.append(f"| {layer}: {holds} | {folder} | {cell} |" if unit == units[0] else f"| | {folder} | {cell} |")
    return "\n".join(out) + "\n"


BEGIN = "<!-- layers: written by python -m tests.architecture -->\n"
END = "<!-- end of layers -->\n"
DOC = ROOT / "docs" / "development.md"


def documented() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text[text.index(BEGIN) + len(BEGIN): text.index(END)]


if __name__ == "__main__":
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    DOC.write_text(head + BEGIN + render() + END + tail, encoding="utf-8")
    print(f"wrote the map of {len(LAYERS)} layers into {DOC.relative_to(ROOT)}")
