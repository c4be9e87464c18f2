"""The documentation cannot drift from the code: the generated configuration and CLI references are
what ``docs/generate_reference.py`` writes now, and hold every setting of the schema and every
command and option of ``ragmem``; every page is in the site's navigation; the README stays short."""

from __future__ import annotations

import importlib.util
import re

import pytest
import typer
import yaml

from ragmem.cli.app import app
from ragmem.config.settings import Section, Settings
from tests.conftest import ROOT

DOCS = ROOT / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("generate_reference", DOCS / "generate_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_references_are_up_to_date():
    for path, text in _generator().pages().items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is stale: run python docs/generate_reference.py"


def _settings(model=Settings, prefix=""):
    for name, field in model.model_fields.items():
        yield f"{prefix}{name}"
        if isinstance(field.annotation, type) and issubclass(field.annotation, Section):
            yield from _settings(field.annotation, f"{prefix}{name}.")


def test_every_setting_is_in_the_configuration_reference():
    page = (DOCS / "reference" / "configuration.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([^`]+)` \|", page, re.MULTILINE)) | set(re.findall(r"^## `([^`]+)`", page, re.MULTILINE))
    keys = list(_settings())
    assert len(keys) > 100
    assert [k for k in keys if k not in documented] == []


def _commands(command, words):
    if hasattr(command, "commands"):
        yield " ".join(words), command
        for name, sub in command.commands.items():
            yield from _commands(sub, [*words, name])
    else:
        yield " ".join(words), command


def test_every_command_and_option_is_in_the_cli_reference():
    page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## `([^`]+)`\n(.*?)(?=^## |\Z)", page, re.MULTILINE | re.DOTALL))
    checked = 0
    for words, command in _commands(typer.main.get_command(app), ["ragmem"]):
        if hasattr(command, "commands") and words != "ragmem":
            continue  # a group: its commands have the sections
        assert words in sections, f"{words} is not in the CLI reference"
        for param in command.params:
            if param.param_type_name == "option":
                for flag in param.opts:
                    assert f"`{flag}`" in sections[words], f"{words} {flag}"
                    checked += 1
    assert checked > 60


def test_every_page_is_in_the_navigation_and_the_readme_is_short():
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]

    def pages(entries):
        for entry in entries:
            for value in entry.values():
                yield from pages(value) if isinstance(value, list) else [value]

    listed = set(pages(nav))
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert on_disk == listed
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 150


def test_the_metrics_reference_renders_cross_references_and_examples():
    """The metrics reference page (mkdocstrings) reads the docstrings through docs/griffe_ragmem.py:
    no role is left raw (``:mod:`...```), and every doctest line is in a code block, not folded into
    a paragraph."""
    import importlib
    import inspect
    import sys

    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import griffe_ragmem as extension
    finally:
        sys.path.remove(str(ROOT / "docs"))
    rendered = extension._rendered()
    assert "ragmem.metrics.ranking" in rendered and len(rendered) >= 10
    checked = 0
    for name in rendered:
        module = importlib.import_module(name)
        docs = [module.__doc__ or ""] + [inspect.getdoc(v) or "" for k, v in vars(module).items()
                                         if not k.startswith("_") and getattr(v, "__module__", None) == name]
        for doc in docs:
            text = extension.code_blocks(extension.cross_references(inspect.cleandoc(doc), name, rendered))
            assert not extension.ROLE.search(text), text
            fenced = False
            for line in text.splitlines():
                fenced = (not fenced) if line.startswith("```") else fenced
                assert fenced or not line.startswith(">>>"), (name, line)
            checked += doc.count(">>>")
    assert checked > 30  # the examples are there, each in a block


def test_every_docstring_example_runs_with_the_suite():
    """Every module of the package that shows a ``>>>`` example lies under a path the suite collects
    with ``--doctest-modules`` (pyproject's testpaths), so no example is left unexecuted and wrong."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's (the settings are read the same on 3.10)")
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert "--doctest-modules" in options["addopts"]
    collected = [ROOT / p for p in options["testpaths"]]
    shown = [p for folder in ("ragmem", "flows", "tasks") for p in (ROOT / folder).rglob("*.py")
             if ">>> " in p.read_text(encoding="utf-8")]
    assert len(shown) > 40
    assert [str(p.relative_to(ROOT)) for p in shown if not any(p.is_relative_to(c) for c in collected)] == []


def test_every_config_excerpt_in_the_docs_is_a_valid_config():
    """Each ```yaml block of the docs and the README that is a mapping of settings, pasted as it stands
    into a config, is valid (a rubric's unquoted comma once made the judge page's block refuse to load)."""
    import yaml

    from ragmem.config.loading import RunConfig

    checked, refused = 0, []
    for page in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]:
        text = page.read_text(encoding="utf-8")
        for found in re.finditer(r"```yaml\n(.*?)```", text, re.S):
            where = f"{page.name}:{text[:found.start()].count(chr(10)) + 1}"
            try:
                settings = yaml.safe_load(found.group(1))
                if isinstance(settings, dict):
                    RunConfig.from_dict(settings)
                    checked += 1
            except Exception as exc:  # (any refusal is the excerpt's fault: said with where it is)
                refused.append(f"{where}: {str(exc).splitlines()[0][:200]}")
    assert refused == [] and checked >= 15, (checked, refused)
