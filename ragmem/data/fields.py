"""What a record's texts and ids may hold, and what binds a record's label to the answer it judged:
the checks :mod:`ragmem.data.loaders` applies to every record, ``validate`` and ``run`` alike."""

from __future__ import annotations

import json
import re
from typing import Any

from ragmem.schema import answer_digest

_SURROGATE = re.compile("[\ud800-\udfff]")  # half of a UTF-16 pair: no UTF-8 for it
_CONTROL = re.compile("[\x00-\x1f\x7f]")     # control characters (refused in ids)
_DIGEST = re.compile(r"[0-9a-fA-F]{64}")


def _codepoint(char: str) -> str:
    return f"U+{ord(char):04X}"


def lone_surrogate(value: str) -> str | None:
    """The first lone surrogate of ``value`` as ``U+XXXX``, or ``None``.

    >>> lone_surrogate("ok"), lone_surrogate("half \\udc00 pair")
    (None, 'U+DC00')
    """
    bad = _SURROGATE.search(value)
    return None if bad is None else _codepoint(bad.group())


def text_problem(value: str) -> str | None:
    """Why a text cannot be kept, or ``None``: a lone surrogate, which UTF-8 cannot write (the run
    would fail at the first file it writes). Control characters are kept in a text.

    >>> text_problem("half \\udc00 pair")
    'a lone surrogate U+DC00 at character 6: not Unicode text (a JSON \\\\u escape of half a character pair?)'
    """
    bad = _SURROGATE.search(value)
    if bad is None:
        return None
    return (f"a lone surrogate {_codepoint(bad.group())} at character {bad.start() + 1}: not Unicode text "
            f"(a JSON \\u escape of half a character pair?)")


def id_problem(value: str) -> str | None:
    """Why an id cannot be kept, or ``None``: it is written as a file's key, a trace's, a sheet's
    cell, so printable text only (no control character, NUL included; no lone surrogate)."""
    bad = _SURROGATE.search(value) or _CONTROL.search(value)
    if bad is None:
        return None
    return (f"{_codepoint(bad.group())} at character {bad.start() + 1}: an id is printable text "
            f"(no control character, no lone surrogate)")


def label_answer(raw: dict[str, Any], label: int | None, answer: str | None) -> tuple[str | None, str | None]:
    """``(digest, problem)``: the digest of the answer a record's label judged
    (:func:`ragmem.schema.answer_digest`): ``label_answer_sha256`` when the record gives it (64 hex
    digits), else its ``generated_answer``'s; ``None`` without a label, or when neither says which
    answer it judged."""
    given = raw.get("label_answer_sha256")
    if given is not None:
        if not (isinstance(given, str) and _DIGEST.fullmatch(given)):
            return None, f"expected the 64 hex digits of a SHA-256, got {json.dumps(given, default=str)[:80]}"
        return (given.lower() if label is not None else None), None
    return (answer_digest(answer) if label is not None and answer is not None else None), None
