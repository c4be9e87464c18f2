"""The documents a test set is generated from: a folder (txt, md, html, and pdf with the ``pdf``
extra, read recursively), one such file, or a corpus JSON of the reference agent (``{documents: [{id, text}]}``), each cut into the
reference agent's chunks (:func:`ragmem.reference.corpus.chunk_text`: the same ids ``DOC#cN`` it
retrieves, when it is given the same documents and chunking).

What cannot be read is named, never a traceback: an empty folder, a file that is not text (a NUL
byte, or not UTF-8: ``--encoding``), an empty document; skipped files are counted, not dropped in
silence. Documents are read one at a time (a large folder is not held twice); a large text file
is read as it streams, and a corpus of more chunks than asked is sampled as it is read, so a text
file of any size is read in bounded memory.
"""

from __future__ import annotations

import codecs
import html.parser
import json
import random
import logging
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ragmem.errors import ConfigError, DataError
from ragmem.reference.corpus import Chunk, chunk_stream

SUFFIXES = {".txt": "text", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html",
            ".pdf": "pdf"}


@dataclass(frozen=True)
class Document:
    id: str        # the path under the folder (``guides/setup.md``), or the corpus JSON's id
    text: str      # ("" for a file read as it streams: its text is in its chunks only)
    source: str    # the file it was read from
    parts: Iterable[str] | None = None  # a large text file's text, read as it streams (once)


@dataclass
class Read:
    """What reading a corpus gave: its documents and chunks, and what was left out, with why."""

    documents: list[Document] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)  # (a sample of them when the corpus holds more than asked)
    skipped: dict[str, str] = field(default_factory=dict)  # file -> why it was left out
    n_chunks: int = 0  # the chunks of the corpus, sampled or not


class _Text(html.parser.HTMLParser):
    """The visible text of an HTML page (no script, style or head)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style", "head", "noscript"):
            self._hidden += 1
        elif tag in ("p", "div", "br", "li", "h1", "h2", "h3", "h4", "tr", "section", "article"):
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in ("script", "style", "head", "noscript") and self._hidden:
            self._hidden -= 1

    def handle_data(self, data):
        if not self._hidden:
            self.parts.append(data)


def html_text(page: str) -> str:
    """The text a reader sees of an HTML page.

    >>> html_text("<html><head><title>t</title></head><body><p>One &amp; two.</p><script>x()</script></body></html>")
    'One & two.'
    """
    parser = _Text()
    parser.feed(page)
    return _tidy("".join(parser.parts))


def _tidy(text: str) -> str:
    lines = [" ".join(line.split()) for line in text.splitlines()]
    return "\n".join(line for line in lines if line).strip()


def markdown_text(text: str) -> str:
    """Markdown as prose: code blocks, heading marks, link targets and emphasis marks left out.

    >>> markdown_text("# Setup\\n\\nRun **ragmem** ([docs](http://x)).\\n```\\ncode\\n```")
    'Setup\\nRun ragmem (docs).'
    """
    text = re.sub(r"```.*?(```|$)", "", text, flags=re.DOTALL)
    # (a link's text and target stop at the next bracket: linear, where [^\]]* tried every '[' to the end)
    text = re.sub(r"!?\[([^\[\]]{0,2000})\]\([^()]{0,2000}\)", r"\1", text)
    text = re.sub(r"^\s{0,3}#{1,6}\s*", "", text, flags=re.MULTILINE)
    text = re.sub(r"(\*\*|__|\*|`)", "", text)
    return _tidy(text)


STREAM_BYTES = 16 << 20  # a .txt file larger than this is tidied and chunked as it is read (bounded memory)
WHOLE_BYTES = 256 << 20  # a markdown, HTML or PDF file is read whole: one larger than this is skipped, said
BLOCK = 1 << 20


def _streamed_text(path: Path, encoding: str) -> Iterator[str]:
    """:func:`_tidy` of a text file's text in parts, read ``BLOCK`` bytes at a time (the same text)."""
    decoder = codecs.getincrementaldecoder(encoding)()
    offset, pending, first = 0, "", True
    with open(path, "rb") as handle:
        while True:
            data = handle.read(BLOCK)
            if offset == 0 and b"\x00" in data[:8192]:
                raise DataError(str(path), "not a text file (it holds NUL bytes: a binary file?)")
            try:
                text = pending + decoder.decode(data, final=not data)
            except UnicodeDecodeError as exc:
                raise DataError(str(path), f"not {encoding} text ({exc.reason} at byte {offset + exc.start}); give its "
                                           f"encoding with --encoding (e.g. gb18030)") from None
            offset += len(data)
            lines = text.splitlines(keepends=True)
            pending = lines.pop() if data and lines and lines[-1] == lines[-1].rstrip("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029") else ""
            tidied = [t for t in (" ".join(line.split()) for line in lines) if t]
            if tidied:
                yield ("" if first else "\n") + "\n".join(tidied)
                first = False
            if not data:
                return


def _decoded(path: Path, encoding: str) -> str:
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise DataError(str(path), "not a text file (it holds NUL bytes: a binary file?)")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise DataError(str(path), f"not {encoding} text ({exc.reason} at byte {exc.start}); give its encoding "
                                   f"with --encoding (e.g. gb18030)") from None


def pdf_text(path: Path) -> str:
    """A PDF's text, page after page (pypdf, the ``pdf`` extra); a DataError naming the file when it
    cannot be read (the extra missing, an encrypted or broken file)."""
    try:
        import pypdf  # (the pdf extra: imported only when a folder holds a PDF)
    except ImportError:
        raise DataError(str(path), "a PDF: reading it needs the pdf extra (pip install 'ragmem[pdf]')") from None
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # (a broken file is said once, as skipped, not as pypdf's warnings)
    try:
        reader = pypdf.PdfReader(str(path))
        if reader.is_encrypted:
            raise DataError(str(path), "an encrypted PDF: not read")
        return "\n".join(page.extract_text() or "" for page in reader.pages)
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001  (pypdf's errors for a broken file are of many kinds)
        raise DataError(str(path), f"not a readable PDF ({type(exc).__name__}: {exc})") from None


def _files(root: Path, skipped: dict[str, str]) -> Iterator[Path]:
    """The regular files under ``root`` (hidden ones left out), in order. Never followed, each said in
    ``skipped``: a link that leads out of the folder, a link to a folder (it could loop), and what is
    not a regular file (a FIFO would block a reader for ever; a socket, a device)."""
    if not root.is_dir():
        if not stat.S_ISREG(root.stat().st_mode):
            raise DataError(str(root), "not a regular file (a FIFO, socket or device): not read")
        yield root
        return
    inside, found = root.resolve(), []
    for folder, dirs, names in os.walk(root, followlinks=False):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in [d for d in dirs if (here / d).is_symlink()]:
            skipped[str(here / name)] = "a link to a folder: not followed"
            dirs.remove(name)
        for name in sorted(n for n in names if not n.startswith(".")):
            path = here / name
            if path.is_symlink() and not path.resolve().is_relative_to(inside):
                skipped[str(path)] = f"a link out of the folder (to {path.resolve()}): not followed"
                continue
            try:
                regular = stat.S_ISREG(path.stat().st_mode)
            except OSError as exc:  # (a broken link, a file gone since the listing)
                skipped[str(path)] = f"cannot be read ({exc.strerror or exc})"
                continue
            if not regular:
                skipped[str(path)] = "not a regular file (a FIFO, socket or device): not read"
                continue
            found.append(path)
    yield from sorted(found)  # (the order of a sorted listing, as before: the test set's seeded draws keep it)


def read_corpus(source: str | Path, chunk_size: int = 200, chunk_overlap: int = 40, encoding: str = "utf-8",
                strict: bool = False, advance: Callable[[int], None] = lambda n: None,
                max_chunks: int | None = None, seed: int = 0) -> Read:
    """The documents of ``source`` (module docstring), chunked. A file that cannot be read is a
    :class:`ragmem.errors.DataError` naming it with ``strict``, else skipped and said in ``skipped``.
    ``advance(1)`` after each document (the progress of a large folder). A corpus of more than
    ``max_chunks`` chunks keeps a uniform sample of that many, drawn with ``seed`` as the chunks are
    read (reservoir sampling: memory holds the sample, never the corpus) and kept in corpus order;
    :attr:`Read.n_chunks` counts them all. A large text file is read as it streams (``STREAM_BYTES``)."""
    root = Path(source).expanduser()
    if not root.exists():
        raise ConfigError(f"{source}: no such file or folder")
    read = Read()
    if root.is_file() and root.suffix.lower() == ".json":
        try:
            documents = json.loads(root.read_text(encoding=encoding))["documents"]
            docs: Iterable[Document] = [Document(str(d["id"]), str(d["text"]), str(root)) for d in documents]
        except RecursionError:
            raise DataError(str(root), "nested too deep to be a corpus JSON {documents: [{id, text}, ...]}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise DataError(str(root), f"expected a corpus JSON {{documents: [{{id, text}}, ...]}} ({exc})") from None
    else:
        docs = _documents(root, encoding, strict, read.skipped)
    rng, kept = random.Random(seed), list[tuple[int, Chunk]]()  # (its number in the corpus, the chunk)
    for doc in docs:
        pieces = chunk_stream(doc.parts if doc.parts is not None else (doc.text,), chunk_size, chunk_overlap)
        counted = read.n_chunks
        for n, piece in enumerate(pieces):
            chunk = Chunk(f"{doc.id}#c{n}", doc.id, piece)
            if max_chunks is None or len(kept) < max_chunks:
                kept.append((read.n_chunks, chunk))
            elif (j := rng.randrange(read.n_chunks + 1)) < max_chunks:
                kept[j] = (read.n_chunks, chunk)
            read.n_chunks += 1
        if read.n_chunks == counted:
            read.skipped[doc.source] = "no text" + (" (a scanned PDF holds images, not text)"
                                                    if doc.source.lower().endswith(".pdf") else "")
            continue
        read.documents.append(doc if doc.parts is None else Document(doc.id, "", doc.source))
        advance(1)
    read.chunks = [chunk for _, chunk in sorted(kept, key=lambda pair: pair[0])]
    if not read.documents:
        kinds = ", ".join(sorted(set(SUFFIXES)))
        why = f" ({len(read.skipped)} skipped: {next(iter(read.skipped.values()))})" if read.skipped else ""
        raise DataError(str(source), f"no document to generate from: no readable {kinds} file{why}")
    return read


def _documents(root: Path, encoding: str, strict: bool, skipped: dict[str, str]) -> Iterator[Document]:
    for path in _files(root, skipped):
        kind = SUFFIXES.get(path.suffix.lower())
        if kind is None:
            skipped[str(path)] = f"not one of {', '.join(sorted(SUFFIXES))}"
            continue
        size = path.stat().st_size
        doc_id = path.name if root.is_file() else path.relative_to(root).as_posix()
        if kind == "text" and size > STREAM_BYTES:
            yield Document(doc_id, "", str(path), parts=_streamed_text(path, encoding))
            continue
        if size > WHOLE_BYTES:
            skipped[str(path)] = (f"{size / 2**20:,.0f} MiB of {kind}: larger than the {WHOLE_BYTES >> 20} MiB read whole "
                                  f"(a .txt file of any size is read as it streams)")
            continue
        try:
            text = pdf_text(path) if kind == "pdf" else _decoded(path, encoding)
        except DataError as exc:
            if strict:
                raise
            skipped[str(path)] = exc.detail
            continue
        text = html_text(text) if kind == "html" else markdown_text(text) if kind == "markdown" else _tidy(text)
        yield Document(doc_id, text, str(path))
