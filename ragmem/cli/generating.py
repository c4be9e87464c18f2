"""``ragmem generate``: a test set from a team's own documents (:mod:`ragmem.testsets`)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ragmem.cli.common import setup_logging, store_uri, writable
from ragmem.data.hashing import file_sha256
from ragmem.data.readers import check_encoding
from ragmem.errors import RagmemError
from ragmem.report.terminal import plural, say
from ragmem.runtime import progress
from ragmem.testsets import documents, probes
from ragmem.text.keywords import KeywordExtractor
from ragmem.tracking import record_testset, Tracker


def generate(
    corpus: Path = typer.Argument(..., help="A folder of documents (txt, md, html, read recursively), one such file, "
                                            "or a corpus JSON {documents: [{id, text}]} (corpus.path's format)."),
    n: int = typer.Option(100, "--n", help="How many questions to write."),
    output: Path = typer.Option(Path("testset.jsonl"), "--output", "-o", help="The test set (JSONL; JSON for .json)."),
    offline: bool = typer.Option(False, "--offline", help="Retrieval probes from each chunk's distinctive terms: "
                                                           "no LLM is called."),
    seed: int = typer.Option(0, "--seed", help="Which chunks, in which order (the same seed, the same file)."),
    chunk_size: int = typer.Option(200, "--chunk-size", help="Chunk window in characters (as corpus.chunk_size: "
                                                             "give the reference agent the same)."),
    chunk_overlap: int = typer.Option(40, "--chunk-overlap", help="Characters shared by consecutive chunks."),
    encoding: str = typer.Option("utf-8", "--encoding", help="Text encoding of the documents, e.g. gb18030."),
    tokenizer: str = typer.Option("rjieba", "--tokenizer", help="Keywords' tokenizer: rjieba, jieba or char."),
    experiment: str = typer.Option("testsets", "--experiment", help="MLflow experiment the test set is logged in "
                                                                   "(as a run whose dataset is the file)."),
    track: bool = typer.Option(True, "--track/--no-track", help="Log the test set to the home's MLflow store "
                                                                 "(or MLFLOW_TRACKING_URI)."),
) -> None:
    """Write a test set generated from documents: with --offline, retrieval probes (a query of a chunk's
    distinctive terms, that chunk its relevant context) for the ranking metrics of any retriever."""
    setup_logging(False)
    if n < 1:
        raise RagmemError(f"--n: expected a positive integer, got {n}")
    if tokenizer not in ("rjieba", "jieba", "char"):
        raise RagmemError(f"--tokenizer: expected rjieba, jieba or char, got {tokenizer!r}")
    try:
        check_encoding(encoding)
    except ValueError as exc:
        raise RagmemError(f"--encoding: {exc}") from None
    if not offline:
        raise RagmemError("generate: this version writes retrieval probes only: add --offline (questions written "
                          "by an LLM are not available yet)")
    output = writable(output)
    store = store_uri(None) if track else None  # (a tracking server that does not answer: one line, before any work)
    with progress.stage("generate: documents read", unit="documents") as stage:
        read = documents.read_corpus(corpus, chunk_size, chunk_overlap, encoding)
        stage.advance(len(read.documents))
    say(f"read {plural(len(read.documents), 'document')} ({plural(len(read.chunks), 'chunk')}) from {corpus}"
        + (f"; {plural(len(read.skipped), 'file')} skipped (first: {next(iter(read.skipped))}: "
           f"{next(iter(read.skipped.values()))})" if read.skipped else ""))
    keywords = KeywordExtractor(tokenizer)
    made = probes.make_probes(read.chunks, keywords, n, seed)
    sources = {d.id: d.source for d in read.documents}
    rows = probes.records(made, sources, seed, keywords, f"{chunk_size}/{chunk_overlap}")
    _write(output, rows)
    covered = len({p.chunk.doc_id for p in made})
    say(f"wrote {plural(len(rows), 'probe')} from {covered} of {plural(len(read.documents), 'document')} "
        f"({covered / len(read.documents):.0%}) to {output}"
        + (f"; {n} asked: the corpus holds no more distinct ones" if len(rows) < n else ""))
    with progress.stage("generate: BM25 check", len(made)) as stage:
        first = probes.bm25_first(read.chunks, made, keywords, stage.advance)
    say(f"BM25 ranks the probe's own chunk first on {first} of {len(made)} ({first / max(1, len(made)):.1%}): "
        f"how easy the probes are for a keyword retriever")
    if track:
        run_id = record_testset(Tracker(store), experiment, output, file_sha256(output), {
            "corpus": str(Path(corpus).resolve()), "generator": probes.GENERATOR, "mode": "offline", "n": str(n),
            "seed": str(seed), "chunking": f"{chunk_size}/{chunk_overlap}", "keywords.signature": keywords.signature(),
            "encoding": encoding}, {"n_questions": len(rows), "n_documents": len(read.documents),
                                    "n_documents_covered": covered, "n_chunks": len(read.chunks),
                                    "n_files_skipped": len(read.skipped), "bm25_first": first / max(1, len(made))})
        say(f"MLflow run {run_id} in experiment {experiment!r}: the test set as its dataset and artifact")
    say(f"next: ragmem run CONFIG --data {output} (an agent over the same documents, chunked {chunk_size}/"
        f"{chunk_overlap}; the ranking metrics hit_rate_at_k, mrr_at_k, ndcg_at_k)")


def _write(path: Path, rows: list[dict]) -> None:
    """JSON lines, or one JSON list when the name ends in .json; written whole (a temporary file renamed)."""
    partial = path.with_name(f".{path.name}.partial")
    with open(partial, "w", encoding="utf-8") as out:
        if path.suffix.lower() == ".json":
            json.dump(rows, out, ensure_ascii=False, indent=1)
        else:
            out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    partial.replace(path)
