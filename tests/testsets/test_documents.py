"""Reading a corpus for ``ragmem generate`` safely (issue 60, point 6): a link out of the folder and a
link to a folder are not followed, a FIFO is never opened, each said with why; patterns stay linear
(100 KB of ``[`` in well under a second); a JSON nested too deep is one line naming the file."""

from __future__ import annotations

import collections
import json

import os
import time

import pytest

from ragmem.errors import DataError
from ragmem.testsets import documents
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


def test_a_large_text_file_read_as_it_streams_gives_the_chunks_of_the_file_read_whole(tmp_path, monkeypatch):
    """The streamed path against the whole one (the oracle): a file with every kind of line end, blank
    lines, runs of spaces, Chinese text split mid-character by the blocks, read in blocks of 97 bytes."""
    import random

    rng = random.Random(3)
    words = ["alpha", "beta.", "gamma!", "数据", "检索。", "  ", "\t", "delta?"]
    ends = ["\n", "\r\n", "\r", "\n\n", "\x0c", "\u2028", "\x85"]
    text = "".join(rng.choice(words) + (rng.choice(ends) if rng.random() < 0.1 else " ") for _ in range(20_000))
    path = tmp_path / "big.txt"
    path.write_text(text, encoding="utf-8")
    whole = documents.read_corpus(path, 120, 30)
    monkeypatch.setattr(documents, "STREAM_BYTES", 1000)
    monkeypatch.setattr(documents, "BLOCK", 97)
    streamed = documents.read_corpus(path, 120, 30)
    assert [(c.id, c.text) for c in streamed.chunks] == [(c.id, c.text) for c in whole.chunks]
    assert len(whole.chunks) > 900 and streamed.n_chunks == whole.n_chunks == len(whole.chunks)
    assert streamed.documents[0].text == "" and streamed.documents[0].id == "big.txt"
    # a byte that is not UTF-8 far into the file: named with its offset, as when read whole
    path.write_bytes(text.encode() + b"\xff tail")
    with pytest.raises(DataError, match=rf"big.txt: not utf-8 text \(invalid start byte at byte {len(text.encode())}\)"):
        documents.read_corpus(path, 120, 30, strict=True)


def test_a_corpus_of_more_chunks_than_asked_is_a_seeded_uniform_sample_in_corpus_order(tmp_path):
    """Reservoir sampling checked against its truth: each of 60 chunks is kept with probability 20/60,
    measured over 600 seeds; a seed gives the same sample; the sample is in corpus order."""
    docs = [{"id": f"d{i}", "text": f"Sentence number {i}."} for i in range(60)]
    (tmp_path / "c.json").write_text(json.dumps({"documents": docs}), encoding="utf-8")
    kept = collections.Counter()
    for seed in range(600):
        read = documents.read_corpus(tmp_path / "c.json", max_chunks=20, seed=seed)
        assert len(read.chunks) == 20 and read.n_chunks == 60 and len(read.documents) == 60
        numbers = [int(c.doc_id[1:]) for c in read.chunks]
        assert numbers == sorted(numbers)
        kept.update(numbers)
    assert all(abs(kept[i] / 600 - 1 / 3) < 0.1 for i in range(60)), kept  # (sd of a share: 0.019)
    first = documents.read_corpus(tmp_path / "c.json", max_chunks=20, seed=5).chunks
    assert documents.read_corpus(tmp_path / "c.json", max_chunks=20, seed=5).chunks == first
    assert documents.read_corpus(tmp_path / "c.json", max_chunks=100, seed=5).n_chunks == 60


def test_a_markdown_file_too_large_to_read_whole_is_skipped_and_said(tmp_path, monkeypatch):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "huge.md").write_text("# Title\n\n" + "Words of a page. " * 200)
    (folder / "small.md").write_text("# Small\n\nA page.")
    monkeypatch.setattr(documents, "WHOLE_BYTES", 1000)
    read = documents.read_corpus(folder)
    assert [d.id for d in read.documents] == ["small.md"]
    assert "larger than the 0 MiB read whole" in read.skipped[str(folder / "huge.md")]


def test_chunks_are_the_same_wherever_the_text_is_cut():
    """:func:`chunk_stream` over a text cut in random places against :func:`chunk_text` of it whole."""
    import random

    from ragmem.reference.corpus import chunk_stream, chunk_text

    rng = random.Random(1)
    for _ in range(2_000):
        text = "".join(rng.choice("ab .。!? \n") for _ in range(rng.randint(0, 300)))
        size = rng.randint(1, 40)
        overlap = rng.randint(0, size - 1)
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(0, 10))))
        parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        assert list(chunk_stream(parts, size, overlap)) == chunk_text(text, size, overlap), (parts, size, overlap)
