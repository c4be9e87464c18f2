"""The document corpus and its chunks.

Chunks are character windows (``chunk_size`` characters, consecutive windows sharing
``chunk_overlap``): characters rather than tokens so that Chinese and English are cut the same way
without a tokenizer in the loop. Window ends are moved back to the last sentence end inside the
window when there is one, so chunks rarely cut a sentence. A chunk's id is ``{doc_id}#c{n}``; gold
ids may name the document (``doc_id``) and match every chunk of it.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ragmem.errors import ConfigError

BUNDLED = "bundled"
_SENTENCE_END = re.compile(r"[。！？!?]|\.(?=\s|$)")


@dataclass(frozen=True)
class Chunk:
    id: str
    doc_id: str
    text: str


@dataclass(frozen=True)
class Corpus:
    documents: tuple[dict, ...]
    memories: tuple[dict, ...]
    sha256: str


def load_corpus(path: str = BUNDLED) -> Corpus:
    """``bundled`` (the bilingual corpus shipped with ragmem) or a JSON file
    ``{"documents": [{id, text, title?}], "memories": [{user_id, id, text, timestamp?}]}``."""
    if path == BUNDLED:
        raw = resources.files("ragmem.datasets").joinpath("reference_corpus.json").read_bytes()
    else:
        file = Path(path)
        if not file.is_file():
            raise ConfigError(f"corpus.path: {path}: file not found")
        raw = file.read_bytes()
    try:
        data = json.loads(raw)
        documents = tuple(data["documents"])
        memories = tuple(data.get("memories", ()))
        for i, doc in enumerate(documents):
            if not isinstance(doc.get("id"), str) or not isinstance(doc.get("text"), str):
                raise ConfigError(f"corpus.path: {path}: documents[{i}] needs string 'id' and 'text'")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"corpus.path: {path}: expected {{documents: [...], memories: [...]}} ({exc})") from None
    return Corpus(documents, memories, hashlib.sha256(raw).hexdigest())


def chunk_text(text: str, chunk_size: int, chunk_overlap: int) -> list[str]:
    """Split into windows of at most ``chunk_size`` characters overlapping by ``chunk_overlap``."""
    return list(chunk_stream((text,), chunk_size, chunk_overlap))


def chunk_stream(parts: Iterable[str], chunk_size: int, chunk_overlap: int) -> Iterator[str]:
    """:func:`chunk_text` of the text ``parts`` make together, read part after part (a file of any
    size in bounded memory): each window ends at the last sentence end within ``chunk_size``
    characters (when that leaves more than the overlap), else at ``chunk_size``; the next starts
    ``chunk_overlap`` characters before. The same windows whatever the parts' sizes.

    >>> list(chunk_stream(["One. Tw", "o. Three."], 8, 2))
    ['One.', 'e. Two.', 'o. Three', 'ee.']
    >>> list(chunk_stream(["One. Two. Three."], 8, 2)) == chunk_text("One. Two. Three.", 8, 2)
    True
    """
    if chunk_size < 1:
        raise ConfigError(f"corpus.chunk_size: must be >= 1, got {chunk_size}")
    if not 0 <= chunk_overlap < chunk_size:
        raise ConfigError(f"corpus.chunk_overlap: must be >= 0 and < chunk_size ({chunk_size}), got {chunk_overlap}")
    rest, text, start, done = iter(parts), "", 0, False
    while True:
        while not done and len(text) - start <= chunk_size:  # a window must see past its end, or the text's end
            part = next(rest, None)
            if part is None:
                done = True
            else:
                text, start = text[start:] + part, 0
        if start >= len(text):
            return
        end = min(len(text), start + chunk_size)
        if end < len(text):
            ends = [m.end() for m in _SENTENCE_END.finditer(text, start, end)]
            if ends and ends[-1] > start + chunk_overlap:
                end = ends[-1]
        piece = text[start:end].strip()
        if piece:
            yield piece
        if end >= len(text):  # (only once every part is read: a window short of the text's end refills first)
            return
        start = max(end - chunk_overlap, start + 1)


def chunk_corpus(corpus: Corpus, chunk_size: int, chunk_overlap: int) -> list[Chunk]:
    out = []
    for doc in corpus.documents:
        for n, piece in enumerate(chunk_text(doc["text"], chunk_size, chunk_overlap)):
            out.append(Chunk(f"{doc['id']}#c{n}", doc["id"], piece))
    return out
