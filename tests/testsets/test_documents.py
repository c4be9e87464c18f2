"""Reading a corpus for ``ragmem generate`` safely (issue 60, point 6): a link out of the folder and a
link to a folder are not followed, a FIFO is never opened, each said with why; patterns stay linear
(100 KB of ``[`` in well under a second); a JSON nested too deep is one line naming the file."""

from __future__ import annotations

import os
import time

import pytest

from ragmem.errors import DataError
from ragmem.testsets.documents import markdown_text, read_corpus


def test_links_out_loops_and_fifos_are_named_and_never_followed(tmp_path):
    docs, outside = tmp_path / "docs", tmp_path / "outside"
    (docs / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "private.txt").write_text("text from outside the corpus about salaries", encoding="utf-8")
    (docs / "a.txt").write_text("Vector databases store embeddings for retrieval.", encoding="utf-8")
    (docs / "sub" / "b.md").write_text("# Retrieval\n\nBM25 ranks documents by term statistics.", encoding="utf-8")
    (docs / "inside.txt").symlink_to(docs / "a.txt")  # a link inside the folder: read
    (docs / "out.txt").symlink_to(outside / "private.txt")
    (docs / "sub" / "loop").symlink_to(docs, target_is_directory=True)
    os.mkfifo(docs / "pipe.txt")
    read = read_corpus(docs)
    assert [d.id for d in read.documents] == ["a.txt", "inside.txt", "sub/b.md"]
    assert "salaries" not in " ".join(c.text for c in read.chunks)
    assert read.skipped == {str(docs / "out.txt"): f"a link out of the folder (to {outside / 'private.txt'}): not followed",
                            str(docs / "pipe.txt"): "not a regular file (a FIFO, socket or device): not read",
                            str(docs / "sub" / "loop"): "a link to a folder: not followed"}


def test_a_fifo_given_as_the_corpus_is_refused_without_opening_it(tmp_path):
    os.mkfifo(tmp_path / "pipe.txt")
    with pytest.raises(DataError, match="not a regular file"):
        read_corpus(tmp_path / "pipe.txt")


@pytest.mark.parametrize("text", ["[" * 100_000, "](" * 50_000, "![" * 50_000 + "](" * 50_000])
def test_markdown_patterns_are_linear(text):
    start = time.perf_counter()
    markdown_text(text)
    assert time.perf_counter() - start < 1.0  # (the link pattern took 35 s on 100 KB of '[')


def test_a_json_nested_too_deep_is_one_line_naming_the_file(tmp_path):
    (tmp_path / "nested.json").write_text("[" * 100_000, encoding="utf-8")
    with pytest.raises(DataError, match=r"nested.json: nested too deep to be a corpus JSON"):
        read_corpus(tmp_path / "nested.json")
