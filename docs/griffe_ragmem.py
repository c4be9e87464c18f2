"""A Griffe extension for the metrics reference (``docs/reference/metrics.md``): ragmem's docstrings are
written for ``help()`` and doctest, in reStructuredText's habits; this turns them into the Markdown
mkdocstrings renders.

- ``:mod:``, ``:func:``, ``:class:``, ``:data:``, ``:attr:``, ``:meth:`` roles become cross-references:
  a link to the module's section when that module is on the page, else the name as code;
- a doctest (``>>>`` lines and their output) becomes a code block, not a paragraph;
- a paragraph ending ``::`` (a literal block follows, indented) ends with ``:``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import griffe

PAGE = Path(__file__).parent / "reference" / "metrics.md"
ROLE = re.compile(r":(?:mod|func|class|data|attr|meth|obj|exc):`(~?)([\w.]+)`")


def _rendered() -> list[str]:
    """The modules the metrics reference renders (its ``::: module`` lines), longest first."""
    names = re.findall(r"^::: ([\w.]+)\s*$", PAGE.read_text(encoding="utf-8"), re.MULTILINE)
    return sorted(names, key=len, reverse=True)


def cross_references(text: str, here: str, rendered: list[str]) -> str:
    """Every role in ``text`` (of the module ``here``) as a link or as code.

    >>> cross_references("see :func:`ragmem.metrics.ranking.mrr` and :mod:`~ragmem.run.engine`",
    ...                  "ragmem.metrics.rag", ["ragmem.metrics.ranking"])
    'see [`ragmem.metrics.ranking.mrr`][ragmem.metrics.ranking] and `engine`'
    """
    def one(match: re.Match) -> str:
        short, target = match.group(1), match.group(2)
        full = target if target.startswith("ragmem.") else f"{here}.{target}"
        shown = f"`{target.rsplit('.', 1)[-1] if short else target}`"
        module = next((m for m in rendered if full == m or full.startswith(m + ".")), None)
        return f"[{shown}][{module}]" if module else shown
    return ROLE.sub(one, text)


def code_blocks(text: str) -> str:
    r"""Doctests as fenced code; a ``::`` that announces a literal block as ``:``.

    >>> code_blocks("Per run::\n\n    x = 1\n\n>>> 1 + 1\n2\n\nAfter.").splitlines()
    ['Per run:', '', '    x = 1', '', '```pycon', '>>> 1 + 1', '2', '```', '', 'After.']
    """
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if not fenced and line.startswith(">>>"):
            out.append("```pycon")
            fenced = True
        elif fenced and not line.strip():
            out.append("```")
            fenced = False
        out.append(re.sub(r"(\S)::$", r"\1:", line) if not fenced else line)
    if fenced:
        out.append("```")
    return "\n".join(out)


class RagmemDocstrings(griffe.Extension):
    def __init__(self) -> None:
        self.rendered = _rendered()

    def on_object(self, *, obj: griffe.Object, loader: Any = None, **kwargs: Any) -> None:
        if obj.docstring is None:
            return
        module = obj.module.path if hasattr(obj, "module") else obj.path
        obj.docstring.value = code_blocks(cross_references(obj.docstring.value, module, self.rendered))
