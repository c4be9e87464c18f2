"""Offline retrieval probes (``ragmem generate --offline``, issue 45's first step): read from a corpus
JSON or a folder of txt/md/html, sampled evenly across documents with a seed, their chunk ids those
the reference agent retrieves, their difficulty measured against BM25; the file runs through
``ragmem validate`` and ``ragmem.evaluate`` unchanged. The oracle: a corpus whose every chunk holds a
planted pair of rare words, which the probes must name and BM25 must find."""

from __future__ import annotations

import json
import os

import pytest

import ragmem
from ragmem.errors import DataError
from ragmem.reference.corpus import chunk_corpus, load_corpus
from ragmem.testsets import documents, probes
from ragmem.text.keywords import KeywordExtractor
from tests.conftest import ROOT

REFERENCE = ROOT / "ragmem" / "datasets" / "reference_corpus.json"
KEYWORDS = KeywordExtractor("rjieba")


def test_two_hundred_probes_of_the_reference_corpus_cover_its_documents_with_the_agents_chunk_ids():
    read = documents.read_corpus(REFERENCE)
    assert [(c.id, c.text) for c in read.chunks] == [(c.id, c.text) for c in chunk_corpus(load_corpus(), 200, 40)]
    made = probes.make_probes(read.chunks, KEYWORDS, 200, seed=7)
    assert len(made) == 200 and len({p.query for p in made}) == 200
    assert len({p.chunk.doc_id for p in made}) >= 0.8 * len(read.documents)  # (all 24 here)
    per_doc = [sum(p.chunk.doc_id == d.id for p in made) for d in read.documents]
    assert max(per_doc) - min(per_doc) <= 6  # evenly across documents (1 or 2 chunks each)
    assert {p.language for p in made} == {"zh", "en"}
    assert all(p.language == "zh" for p in made if p.chunk.doc_id.startswith("zh"))
    assert all(a in p.chunk.text.lower() and b in p.chunk.text.lower() for p in made for a, b in [p.terms])
    assert made == probes.make_probes(read.chunks, KEYWORDS, 200, seed=7)  # the same seed, the same probes
    assert [p.query for p in probes.make_probes(read.chunks, KEYWORDS, 20, seed=8)] != [p.query for p in made[:20]]
    first = probes.bm25_first(read.chunks, made, KEYWORDS)
    assert 0.9 * len(made) <= first <= len(made)  # keyword probes are easy for BM25 (docs: 197 of 200)


def test_planted_word_pairs_are_what_the_probes_name_and_bm25_finds_them_all(tmp_path):
    """The oracle: 30 chunks of shared filler, each with its own pair of rare words planted twice."""
    rare = [f"zork{i:02d}" for i in range(60)]
    docs = [{"id": f"d{i}", "text": f"Filler words about systems and data. The {rare[2 * i]} meets the {rare[2 * i + 1]}; "
                                    f"again {rare[2 * i]} with {rare[2 * i + 1]}. Filler words about systems."}
            for i in range(30)]
    (tmp_path / "c.json").write_text(json.dumps({"documents": docs}), encoding="utf-8")
    read = documents.read_corpus(tmp_path / "c.json")
    made = probes.make_probes(read.chunks, KEYWORDS, 30, seed=0)
    assert len(made) == 30 and {p.chunk.doc_id for p in made} == {d["id"] for d in docs}
    for p in made:
        i = int(p.chunk.doc_id[1:])
        assert set(p.terms) == {rare[2 * i], rare[2 * i + 1]}  # the planted pair: the most distinctive terms
    assert probes.bm25_first(read.chunks, made, KEYWORDS) == 30


def test_a_folder_of_documents_is_read_and_what_cannot_be_read_is_named(tmp_path):
    folder = tmp_path / "docs"
    (folder / "guides").mkdir(parents=True)
    (folder / "guides" / "setup.md").write_text("# Setup\n\nInstall **ragmem** with pip.\n```\npip install\n```\n",
                                                encoding="utf-8")
    (folder / "page.html").write_text("<html><head><style>p{}</style></head><body><p>Reranking adds latency."
                                      "</p><script>x()</script></body></html>", encoding="utf-8")
    (folder / "notes.txt").write_text("检索增强生成先检索相关文档。", encoding="utf-8")
    (folder / "gbk.txt").write_bytes("向量数据库存储嵌入。".encode("gbk"))
    (folder / "image.png").write_bytes(b"\x89PNG\x00\x00")
    (folder / "blob.txt").write_bytes(b"\x00\x01binary")
    read = documents.read_corpus(folder)
    assert {d.id: d.text for d in read.documents} == {
        "guides/setup.md": "Setup\nInstall ragmem with pip.", "notes.txt": "检索增强生成先检索相关文档。",
        "page.html": "Reranking adds latency."}
    assert read.skipped == {str(folder / "blob.txt"): "not a text file (it holds NUL bytes: a binary file?)",
                            str(folder / "gbk.txt"): read.skipped[str(folder / "gbk.txt")],
                            str(folder / "image.png"): "not one of .htm, .html, .markdown, .md, .pdf, .txt"}
    assert read.skipped[str(folder / "gbk.txt")].startswith("not utf-8 text (") and "--encoding" in \
        read.skipped[str(folder / "gbk.txt")]
    assert [d.id for d in documents.read_corpus(folder / "gbk.txt", encoding="gbk").documents] == ["gbk.txt"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"empty: no document to generate from: no readable .htm, .html"):
        documents.read_corpus(tmp_path / "empty")
    with pytest.raises(DataError, match=r"blob.txt: not a text file"):
        documents.read_corpus(folder / "blob.txt", strict=True)


def test_the_command_writes_probes_that_validate_and_run_unchanged(tmp_path, ragmem_main, shared_store, monkeypatch):
    from mlflow import MlflowClient

    out = tmp_path / "probes.jsonl"
    env = {**os.environ, "MLFLOW_TRACKING_URI": shared_store["uri"]}
    done = ragmem_main(["generate", str(REFERENCE), "--offline", "--n", "60", "-o", str(out), "--experiment",
                        "generated-probes"], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "read 24 documents (36 chunks)" in text and f"wrote 60 probes from 24 of 24 documents (100%) to {out}" in text
    assert "BM25 ranks the probe's own chunk first on " in text
    client = MlflowClient(shared_store["uri"])  # logged: the file as the run's dataset and artifact
    (run,) = client.search_runs([client.get_experiment_by_name("generated-probes").experiment_id])
    assert f"MLflow run {run.info.run_id} in experiment 'generated-probes'" in text
    assert run.data.params["generator"] == probes.GENERATOR and run.data.params["seed"] == "0"
    assert run.data.metrics["count/n_questions"] == 60 and run.data.metrics["count/n_documents_covered"] == 24
    (given,) = run.inputs.dataset_inputs
    assert given.dataset.name == "probes" and str(out) in given.dataset.source
    assert [t.value for t in given.tags if t.key == "mlflow.data.context"] == ["testset"]
    assert [a.path for a in client.list_artifacts(run.info.run_id)] == ["probes.jsonl"]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 60 and rows[0]["question_type"] == "probe" and rows[0]["provenance"]["seed"] == 0
    assert rows[0]["reference_contexts"][0] in REFERENCE.read_text(encoding="utf-8")
    valid = ragmem_main(["validate", str(out), "--no-answer"], cwd=tmp_path)
    assert valid.returncode == 0 and "60 records, all valid" in valid.stdout + valid.stderr
    test_set = ragmem_main(["validate", str(out)], cwd=tmp_path)  # without --no-answer: a test set, said so
    assert test_set.returncode == 0 and (f"{out}: 60 questions, ready for an agent (agent.type python/http/reference); "
                                         "replay needs answers") in test_set.stdout
    result = ragmem.evaluate(str(out), track=False, agent={"type": "reference"}, stats={"resamples": 0},
                             metrics=["hit_rate_at_k", "mrr_at_k"])
    assert result.metrics["hit_rate_at_5"] >= 0.9 and 0.9 <= result.metrics["mrr_at_5"] <= 1
    refused = ragmem_main(["generate", str(REFERENCE), "--n", "5", "-o", str(out), "--no-track"], cwd=tmp_path)
    assert refused.returncode == 2 and "add --offline" in refused.stderr
    empty = tmp_path / "nothing"
    empty.mkdir()
    bad = ragmem_main(["generate", str(empty), "--offline", "--no-track"], cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "no document to generate from" in bad.stderr


def _pdf(lines: list[str]) -> bytes:
    """A one-page PDF showing ``lines`` in Helvetica (written by hand: no PDF writer is a dependency)."""
    text = " ".join(f"({line}) Tj 0 -14 Td" for line in lines)
    stream = f"BT /F1 12 Tf 72 720 Td {text} ET".encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)


def test_a_pdf_is_read_with_the_pdf_extra_and_named_when_it_cannot_be(tmp_path, monkeypatch):
    pytest.importorskip("pypdf", reason="pypdf (the pdf extra, in the test extra) is not installed")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "guide.pdf").write_bytes(_pdf(["Reranking adds thirty milliseconds.", "The index is rebuilt nightly."]))
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf")
    (folder / "blank.pdf").write_bytes(_pdf([]))
    (folder / "notes.txt").write_text("Chunks overlap by forty characters.", encoding="utf-8")
    read = documents.read_corpus(folder)
    doc = read.documents[0]
    assert [d.id for d in read.documents] == ["guide.pdf", "notes.txt"]
    assert doc.id == "guide.pdf" and "Reranking adds thirty milliseconds." in doc.text and "rebuilt nightly" in doc.text
    assert read.skipped[str(folder / "broken.pdf")].startswith("not a readable PDF (")
    assert read.skipped[str(folder / "blank.pdf")] == "no text (a scanned PDF holds images, not text)"
    monkeypatch.setitem(__import__("sys").modules, "pypdf", None)  # the extra not installed: named, never a traceback
    assert documents.read_corpus(folder, strict=False).skipped[str(folder / "guide.pdf")] == \
        "a PDF: reading it needs the pdf extra (pip install 'ragmem[pdf]')"
