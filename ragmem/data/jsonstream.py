"""A JSON text read value by value from a file of any size, in bounded memory: the reader of OTLP
exports (:mod:`ragmem.data.otlp`), which walks the outer objects and arrays of a file itself and
hands each inner value (a span, a resource) to the standard library's decoder.

Why by hand: the outer structure of an export can be the whole file (one ``resourceSpans`` array of
500 MB), so it cannot be decoded whole; ijson streams it, but its C backend ends the process with
SIGSEGV on a number of more than 4,300 digits (ijson 3.6.0, tried here) and its Python backend reads
about 20 MB/s against the standard decoder's 120 MB/s. Here the walk is a few tokens (``{``, ``[``,
``,``, ``:``, ``]``, ``}``) and every value is read by :meth:`json.JSONDecoder.raw_decode`, whose
errors (a number too long, nesting too deep, a bad escape) are the standard library's own.

The file is decoded as UTF-8 (a byte-order mark skipped, as data files accept it) in chunks of
1 MiB; a value larger than ``max_value_chars`` is refused rather than held.

>>> import io
>>> text = JsonText(io.BytesIO(b'{"a": [1, {"b": 2}]}\\n{"a": []}'), "x.json")
>>> text.peek(), text.take("{"), text.value("a key"), text.take(":"), text.take("[")
('{', None, 'a', None, None)
>>> text.value("an item"), text.separator("]"), text.value("an item"), text.separator("]")
(1, True, {'b': 2}, False)
>>> text.line
1
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any, BinaryIO, Iterator

CHUNK = 1 << 20
MAX_VALUE_CHARS = 64 << 20  # a span (or any inner value) of more than 64 Mi characters is refused
_SPACE = re.compile(r"[ \t\r\n]*")
_DECODER = json.JSONDecoder()


class Unreadable(ValueError):
    """What cannot be read, said with the line where it is (:attr:`JsonText.line`)."""


class JsonText:
    """The text of ``handle`` with a cursor: :meth:`peek` at the next token, :meth:`take` it,
    :meth:`value` reads a whole value there; :attr:`line` is the cursor's line (for messages)."""

    def __init__(self, handle: BinaryIO, name: str, max_value_chars: int | None = None):
        self.handle, self.name = handle, name
        self.max_value_chars = MAX_VALUE_CHARS if max_value_chars is None else max_value_chars
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.buf, self.pos, self.eof = "", 0, False
        self.lines_before = 0  # the newlines in the text already dropped from the buffer

    @property
    def line(self) -> int:
        return self.lines_before + self.buf.count("\n", 0, self.pos) + 1

    def _more(self) -> bool:
        """More text after the buffer's end (what was read before the cursor dropped); False at the end."""
        if self.eof:
            return False
        raw = self.handle.read(CHUNK)  # (read here, not bound at import: the tests shrink it)
        try:
            text = self.decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            raise Unreadable(f"line {self.line}: not UTF-8 text ({exc.reason})") from None
        if not raw:
            self.eof = True
        if self.pos:
            self.lines_before += self.buf.count("\n", 0, self.pos)
            self.buf = self.buf[self.pos:]
            self.pos = 0
        self.buf += text
        return bool(raw)

    def peek(self) -> str | None:
        """The next character that is not white space (``None`` at the end of the text)."""
        while True:
            self.pos = _SPACE.match(self.buf, self.pos).end()  # type: ignore[union-attr]  # (matches the empty string)
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return None

    def take(self, token: str) -> None:
        found = self.peek()
        if found != token:
            shown = "the end of the file" if found is None else repr(found)
            raise Unreadable(f"line {self.line}: not JSON (expected {token!r}, found {shown})")
        self.pos += 1

    def members(self) -> Iterator[str]:
        """The keys of the object at the cursor, one at a time, the cursor left at each key's value
        (which the caller reads before asking for the next key)."""
        self.take("{")
        if self.peek() == "}":
            self.pos += 1
            return
        while True:
            key = self.value("a key")
            if not isinstance(key, str):
                raise Unreadable(f"line {self.line}: not JSON (a key that is not a string)")
            self.take(":")
            yield key
            if not self.separator("}"):
                return

    def items(self) -> Iterator[int]:
        """The items of the array at the cursor: their numbers, the cursor left at each item (which the
        caller reads before asking for the next)."""
        self.take("[")
        if self.peek() == "]":
            self.pos += 1
            return
        number = 0
        while True:
            number += 1
            yield number
            if not self.separator("]"):
                return

    def separator(self, closing: str) -> bool:
        """After an item: ``,`` (True: another follows) or ``closing`` (False)."""
        found = self.peek()
        if found in (",", closing):
            self.pos += 1
            return found == ","
        shown = "the end of the file" if found is None else repr(found)
        raise Unreadable(f"line {self.line}: not JSON (expected ',' or {closing!r}, found {shown})")

    def value(self, what: str) -> Any:
        """The JSON value at the cursor, read whole (more of the file read until it is complete)."""
        if self.peek() is None:
            raise Unreadable(f"line {self.line}: not JSON ({what} expected, found the end of the file)")
        while True:
            try:
                found, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                cut = exc.pos >= len(self.buf) - 8 or exc.msg.startswith("Unterminated string")
                if cut and self._grow(what):
                    continue
                raise Unreadable(f"line {self.line}: not JSON ({exc.msg})") from None
            except RecursionError:
                raise Unreadable(f"line {self.line}: {what} nested deeper than can be read") from None
            except ValueError as exc:  # a number of more digits than Python converts (4,300)
                raise Unreadable(f"line {self.line}: {what}: {str(exc).split(';')[0]}") from None
            if end == len(self.buf) and self._grow(what):  # (a number cut at the chunk's end reads short)
                continue
            if end - self.pos > self.max_value_chars:  # (read whole within one chunk: refused all the same)
                raise self._too_large(what)
            self.pos = end
            return found

    def _grow(self, what: str) -> bool:
        """Twice as much of the value's text as before (each retry decodes it from its start again:
        doubling keeps a large value's reading linear); False at the end of the file."""
        held = len(self.buf) - self.pos
        if held > self.max_value_chars:
            raise self._too_large(what)
        grew = False
        while len(self.buf) - self.pos < max(2 * held, CHUNK) and self._more():
            grew = True
        return grew

    def _too_large(self, what: str) -> Unreadable:
        return Unreadable(f"line {self.line}: {what} is larger than {self.max_value_chars:,} characters "
                          f"(the most one value may hold)")
