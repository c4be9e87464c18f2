"""Write the configuration and CLI references of the documentation from the code, so neither drifts.

    python docs/generate_reference.py          # rewrites docs/reference/configuration.md and cli.md

The configuration reference walks the settings schema (``ragmem/config/settings.py``): every setting with
its type and allowed values, its default and its description. The CLI reference walks the commands
of ``ragmem`` (``ragmem/cli/app.py``): every command with its help, arguments and options.
``tests/test_docs.py`` fails when a committed file differs from what this script writes, or when a
setting or an option is missing from it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Iterator, get_args, get_origin

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "reference"
sys.path.insert(0, str(ROOT))


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def settings_rows() -> Iterator[tuple[str, str, str, str]]:
    """(dotted key, type, default, description) for every setting, sections walked in order."""
    from pydantic import BaseModel

    from ragmem.config.loading import _field_type, expected
    from ragmem.config.settings import Section, Settings

    def walk(model: type[BaseModel], prefix: str) -> Iterator[tuple[str, str, str, str]]:
        required = {name for name, field in model.model_fields.items() if field.is_required()}
        try:
            defaults = model().model_dump(mode="json")
            if not isinstance(defaults, dict):  # a section written in a short form (metrics: [names])
                defaults = {n: getattr(model(), n) for n in model.model_fields}
        except ValueError:  # a section with a required setting, or one that must name a bound (gates)
            defaults = {n: f.get_default(call_default_factory=True) for n, f in model.model_fields.items()
                        if n not in required}
        for name, field in model.model_fields.items():
            key = f"{prefix}{name}"
            inner = field.annotation
            if isinstance(inner, type) and issubclass(inner, Section):
                yield key, "section", "", field.description or ""
                yield from walk(inner, f"{key}.")
                continue
            default = "(required)" if name in required else json.dumps(defaults.get(name), ensure_ascii=False)
            yield key, expected(_field_type(field)), default, field.description or ""
            value = get_args(inner)[-1] if get_origin(inner) in (dict, list) else None
            if isinstance(value, type) and issubclass(value, Section) and value.model_fields:  # {NAME: section}, [section]
                yield from walk(value, f"{key}.<name>." if get_origin(inner) is dict else f"{key}[].")

    yield from walk(Settings, "")


def configuration_page() -> str:
    lines = ["# Configuration reference", "",
             "Generated from the settings schema (`ragmem/config/settings.py`) by `python docs/generate_reference.py`;",
             "a test fails when this page and the schema disagree. Every key is optional; unknown keys are",
             "errors and types are strict (see [Configuration](../configuration.md)).", ""]
    groups: dict[str, list[str]] = {"top level": []}
    for key, kind, default, description in settings_rows():
        if kind == "section":
            if "." not in key:
                groups[key] = [f"{_cell(description)}", ""] if description else []
                continue
            row = f"| `{key}` | section | | {_cell(description)} |"
        else:
            row = f"| `{key}` | {_cell(kind)} | `{_cell(default)}` | {_cell(description)} |"
        group = key.split(".")[0] if "." in key else "top level"
        groups.setdefault(group, []).append(row)  # ({NAME: section} settings: a group of their own)
    for title, rows in groups.items():
        intro = [r for r in rows if not r.startswith("|")]
        table = [r for r in rows if r.startswith("|")]
        lines += [f"## {title if title == 'top level' else f'`{title}`'}", "", *intro,
                  "| key | type | default | description |", "| --- | --- | --- | --- |", *table, ""]
    return "\n".join(lines).rstrip() + "\n"


def commands() -> Iterator[tuple[str, Any]]:
    """(the command's words, its click command) for every command of ``ragmem``, groups expanded."""
    import typer

    from ragmem.cli.app import app

    def walk(command: Any, words: list[str]) -> Iterator[tuple[str, Any]]:
        if hasattr(command, "commands"):  # a group (typer's copy of click's Group)
            if len(words) == 1:
                yield words[0], command  # the command itself: its own options (--version)
            for name in sorted(command.commands):
                yield from walk(command.commands[name], [*words, name])
        else:
            yield " ".join(words), command

    yield from walk(typer.main.get_command(app), ["ragmem"])


def _type_name(param: Any) -> str:
    """The value's type in words (typer's own parameters, or click's)."""
    import typing

    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if annotation is None:
        return getattr(getattr(param, "type", None), "name", "value")
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (list, typing.Union) and args:
        annotation = next(a for a in args if a is not type(None))
    return {str: "text", int: "integer", float: "number", Path: "path", bool: "true/false"}.get(annotation, "value")


def _param_row(param: Any) -> str:
    if param.param_type_name == "argument":
        name = f"`{(param.metavar or param.name).upper()}`"
        kind = "argument" + ("" if param.required else ", optional") + (", repeatable" if param.nargs == -1 else "")
    else:
        name = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
        kind = "flag" if param.is_flag else f"option ({_type_name(param)})" + (", repeatable" if param.multiple else "")
    default = param.default
    empty = default is None or default is False or (isinstance(default, (list, tuple)) and not default)
    shown = "" if empty or callable(default) else f"`{default}`"
    return f"| {name} | {kind} | {shown} | {_cell(getattr(param, 'help', None) or '')} |"


def cli_page() -> str:
    lines = ["# CLI reference", "",
             "Generated from the commands (`ragmem/cli/app.py`, `ragmem/cli/services.py`) by",
             "`python docs/generate_reference.py`; a test fails when this page and the commands disagree.",
             "Every command ends with one line and an exit code (see [Quality gates](../gates.md)).", ""]
    for words, command in commands():
        lines += [f"## `{words}`", "", _cell(command.help or ""), ""]
        params = [p for p in command.params if p.name != "help"]
        if params:
            lines += ["| argument or option | kind | default | meaning |", "| --- | --- | --- | --- |"]
            lines += [_param_row(p) for p in params]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def pages() -> dict[Path, str]:
    return {OUT / "configuration.md": configuration_page(), OUT / "cli.md": cli_page()}


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for path, text in pages().items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
