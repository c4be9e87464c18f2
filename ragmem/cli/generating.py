"""``ragmem generate``: a test set from a team's own documents (:mod:`ragmem.testsets`): offline
retrieval probes (``--offline``), or questions an LLM writes and the judge checks before they are kept."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ragmem.cli.common import in_config_home, log, setup_logging, store_uri, writable
from ragmem.clients import endpoints
from ragmem.clients.endpoints import mask_url
from ragmem import judges
from ragmem.data.hashing import file_sha256
from ragmem.data.readers import check_encoding
from ragmem.errors import RagmemError, RunFailed
from ragmem.report.terminal import plural, say
from ragmem.run import prepare
from ragmem.runtime import progress
from ragmem.testsets import documents, plan, probes, records, session
from ragmem.testsets.writing import Writer, write_request
from ragmem.text.keywords import KeywordExtractor
from ragmem.tracking import record_testset, Tracker


def generate(
    corpus: Optional[Path] = typer.Argument(None, help="A folder of documents (txt, md, html; pdf with the pdf extra; "
                                                       "read recursively), one "
                                                       "such file, or a corpus JSON {documents: [{id, text}]} "
                                                       "(default: generate.corpus of --config)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML config: its judge (the endpoint that "
                                          "writes and checks), generate, corpus, keywords and tracking sections."),
    set_: List[str] = typer.Option([], "--set", help="Override a setting: dotted.key=value (repeatable)."),
    n: Optional[int] = typer.Option(None, "--n", help="How many questions to write (default generate.n: 100)."),
    output: Path = typer.Option(Path("testset.jsonl"), "--output", "-o", help="The test set (JSONL; JSON for .json)."),
    offline: bool = typer.Option(False, "--offline", help="Retrieval probes from each chunk's distinctive terms: "
                                                           "no LLM is called."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Read the documents, plan the questions and print the "
                                 "requests, cached share and cost the first round would have; send nothing."),
    resume: bool = typer.Option(False, "--resume", help="Go on with an interrupted generate of the same --output "
                                                        "(same settings): only what was not answered is asked."),
    no_preflight: bool = typer.Option(False, "--no-preflight", help="Skip checking the judge endpoint first."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Which chunks, in which order (default: the config's "
                                                            "seed, 0; the same seed, the same file)."),
    chunk_size: Optional[int] = typer.Option(None, "--chunk-size", help="Chunk window in characters (default "
                                             "corpus.chunk_size, 200: give the agent the same)."),
    chunk_overlap: Optional[int] = typer.Option(None, "--chunk-overlap", help="Characters shared by consecutive "
                                                "chunks (default corpus.chunk_overlap, 40)."),
    encoding: str = typer.Option("utf-8", "--encoding", help="Text encoding of the documents, e.g. gb18030."),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="Keywords' tokenizer: rjieba, jieba or char "
                                                                      "(default keywords.tokenizer, rjieba)."),
    experiment: str = typer.Option("testsets", "--experiment", help="MLflow experiment the test set is logged in "
                                                                   "(as a run whose dataset is the file)."),
    track: bool = typer.Option(True, "--track/--no-track", help="Log the test set to the home's MLflow store "
                                                                 "(tracking.uri, or MLFLOW_TRACKING_URI; "
                                                                 "tracking.enabled false: not logged)."),
) -> None:
    """Write a test set generated from documents: with --offline, retrieval probes (a query of a chunk's
    distinctive terms, that chunk its relevant context); else questions of the types and mix of
    generate.mix, written by the judge's LLM and kept only when they pass generate.checks."""
    setup_logging(False)
    if config is not None:
        in_config_home(config)
    overrides = list(set_) + [f"keywords.tokenizer={tokenizer}"] * (tokenizer is not None)
    cfg = prepare.resolve(config, overrides=overrides, extra={"metrics": ["pass_rate"]})
    n = cfg.generate.n if n is None else n
    seed = cfg.seed if seed is None else seed
    size = cfg.corpus.chunk_size if chunk_size is None else chunk_size
    overlap = cfg.corpus.chunk_overlap if chunk_overlap is None else chunk_overlap
    source = _checked(cfg, corpus, n, encoding, offline, dry_run, resume)
    output = writable(output)
    tracked = track and cfg.tracking.enabled and not dry_run
    store = store_uri(cfg.tracking.uri) if tracked else None  # (a dead server: one line, before any work)
    read = _read(source, size, overlap, encoding, cfg.generate.max_chunks, seed)
    keywords = KeywordExtractor(cfg.keywords.tokenizer, tuple(cfg.keywords.stopwords))
    chunking = f"{size}/{overlap}"
    side: tuple[Path, ...] = ()
    if offline:
        rows, params, metrics = _probes(read, keywords, n, seed, chunking, output)
    else:
        made = _written(cfg, read, keywords, n, seed, chunking, output, dry_run, resume, no_preflight)
        if made is None:
            return
        rows, params, metrics = made
        side = (records.side_file(output),)
    if store is not None:
        run_id = record_testset(Tracker(store), experiment, output, file_sha256(output), {
            "corpus": str(Path(source).resolve()), "n": str(n), "seed": str(seed), "chunking": chunking,
            "keywords.signature": keywords.signature(), "encoding": encoding, **params},
            {"n_questions": len(rows), "n_documents": len(read.documents), "n_chunks": read.n_chunks,
             "n_files_skipped": len(read.skipped), **metrics}, side_files=side)
        say(f"MLflow run {run_id} in experiment {experiment!r}: the test set as its dataset and artifact")
    say(f"next: ragmem run CONFIG --data {output} (an agent over the same documents, chunked {chunking})")


def _checked(cfg, corpus: Optional[Path], n: int, encoding: str, offline: bool, dry_run: bool, resume: bool):
    """The options checked together with the settings (one line each, before any work); the documents."""
    if n < 1:
        raise RagmemError(f"--n: expected a positive integer, got {n}")
    try:
        check_encoding(encoding)
    except ValueError as exc:
        raise RagmemError(f"--encoding: {exc}") from None
    source = corpus if corpus is not None else cfg.generate.corpus
    if source is None:
        raise RagmemError("generate: name the documents (ragmem generate FOLDER ...) or set generate.corpus")
    if not offline:
        judges.require_llm(cfg.judge, "generate: questions written by an LLM need an OpenAI-compatible endpoint: "
                                      "judge.type llm, judge.model and judge.base_url (in --config or with --set); "
                                      "or add --offline for retrieval probes with no LLM")
    if offline and (dry_run or resume):
        flag = "--dry-run" if dry_run else "--resume"
        raise RagmemError(f"{flag}: an offline generate sends no request (leave out {flag})")
    return source


def _read(source, size: int, overlap: int, encoding: str, max_chunks: int, seed: int) -> documents.Read:
    with progress.stage("generate: documents read", unit="documents") as stage:
        read = documents.read_corpus(source, size, overlap, encoding, advance=stage.advance, max_chunks=max_chunks,
                                     seed=seed)
    sampled = (f"; questions drawn from a seeded sample of {len(read.chunks):,} of them (generate.max_chunks)"
               if len(read.chunks) < read.n_chunks else "")
    say(f"read {plural(len(read.documents), 'document')} ({plural(read.n_chunks, 'chunk')}) from {source}{sampled}"
        + (f"; {plural(len(read.skipped), 'file')} skipped (first: {next(iter(read.skipped))}: "
           f"{next(iter(read.skipped.values()))})" if read.skipped else ""))
    return read


def _terms(read: documents.Read, keywords: KeywordExtractor) -> list[list[str]]:
    """Every chunk's distinctive terms (the corpus's statistics), with progress on a large corpus."""
    with progress.stage("generate: term statistics", len(read.chunks), unit="chunks") as stage:
        return probes.distinctive(read.chunks, keywords, advance=stage.advance)


def _probes(read: documents.Read, keywords: KeywordExtractor, n: int, seed: int, chunking: str, output: Path):
    """The offline probes, written; the params and metrics their MLflow run logs."""
    made = probes.make_probes(read.chunks, keywords, n, seed, _terms(read, keywords))
    sources = {d.id: d.source for d in read.documents}
    rows = probes.records(made, sources, seed, keywords, chunking)
    records.write_rows(output, rows)
    covered = len({p.chunk.doc_id for p in made})
    say(f"wrote {plural(len(rows), 'probe')} from {covered} of {plural(len(read.documents), 'document')} "
        f"({covered / len(read.documents):.0%}) to {output}"
        + (f"; {n} asked: the corpus holds no more distinct ones" if len(rows) < n else ""))
    with progress.stage("generate: BM25 check", len(made)) as stage:
        first = probes.bm25_first(read.chunks, made, keywords, stage.advance)
    say(f"BM25 ranks the probe's own chunk first on {first} of {len(made)} ({first / max(1, len(made)):.1%}): "
        f"how easy the probes are for a keyword retriever")
    return rows, {"generator": probes.GENERATOR, "mode": "offline"}, {
        "n_documents_covered": covered, "bm25_first": first / max(1, len(made))}


def _written(cfg, read: documents.Read, keywords: KeywordExtractor, n: int, seed: int, chunking: str, output: Path,
             dry_run: bool, resume: bool, no_preflight: bool):
    """The LLM-written questions: planned, (with --dry-run) counted, else written, checked and kept;
    the params and metrics their MLflow run logs. ``None`` after a dry run."""
    settings = cfg.generate
    quotas = plan.quotas(n, settings.mix)
    state = session.State(output)
    judge = cfg.judge
    if not judge.cache:  # replies kept beside the output until the test set is written (session)
        judge = judge.model_copy(update={"cache": True, "cache_dir": str(session.private_cache(output))})
    client = judges.llm_client(judge, "")  # (checked with the options: _checked)
    writer = Writer(client, read.chunks, keywords, settings, seed, say=log.info, terms=_terms(read, keywords))
    say(f"asked: {n} questions: " + ", ".join(f"{q} {t}" for t, q in quotas.items() if q)
        + f" (generate.mix); checks: {', '.join(settings.checks) or 'none'}")
    if dry_run:
        first = writer.first_round(quotas)
        estimate = session.estimate(client, [write_request(c) for c in first],
                                    [session.checks_of(c.type, settings.checks) for c in first])
        short = {t: q for t, q in quotas.items() if q and sum(c.type == t for c in first) < q}
        for line in estimate.lines(settings.max_rounds) + [f"{t}: the documents give only "
                                                           f"{sum(c.type == t for c in first)} candidates for {q}"
                                                           for t, q in short.items()]:
            say(f"dry run: {line}")
        return None
    shaping = {"n": n, "seed": seed, "chunking": chunking, "model": judge.model, "generate": settings.model_dump(
        exclude={"corpus", "n"}), "keywords": keywords.signature(), "temperature": judge.temperature,
        "judge_seed": judge.seed, "prompt_variant": judge.prompt_variant}
    wanted = session.fingerprint(read.chunks, shaping)
    resumed = state.check(wanted, resume)
    if not no_preflight:
        endpoints.preflight([e for e in endpoints.configured(cfg) if e.setting == "judge.base_url"], log=log.info)
    if resumed:
        say(resumed)
    state.begin(wanted)
    generated = writer.run(quotas)
    sources = {d.id: d.source for d in read.documents}
    rows = records.kept_records(generated, sources, model=judge.model, endpoint=mask_url(judge.base_url or "openai"),
                                seed=seed, chunking=chunking, keywords=keywords.signature())
    side = records.side_file(output)
    records.write_rows(side, records.dropped_records(generated.dropped))
    if rows:
        records.write_rows(output, rows)
    state.end()
    said = _said(generated, settings, client, output, side, len(read.documents))
    if not rows:  # a test set of nothing is no test set: said, exit 3, nothing logged
        raise RunFailed(f"generate: no question passed its checks ({len(generated.dropped)} candidates; {side} says "
                        f"why each was dropped); {output} not written")
    return rows, *said


def _said(generated, settings, client, output: Path, side: Path, documents_read: int):
    """The lines that end a generation, and the params and metrics of its MLflow run."""
    got = {t: sum(w.candidate.type == t for w in generated.kept) for t in generated.quotas}
    covered = len({c.doc_id for w in generated.kept for c in w.candidate.chunks})
    if generated.kept:
        say(f"wrote {plural(len(generated.kept), 'question')} ({', '.join(f'{v} {t}' for t, v in got.items())}) "
            f"from {covered} of {plural(documents_read, 'document')} to {output}; {len(generated.dropped)} not kept, "
            f"each with its reason, in {side}")
    else:
        say(f"no question kept: all {len(generated.dropped)} candidates were dropped, each with its reason, in {side}")
    for line in records.survival(generated, settings.checks):
        say(f"  {line}")
    for kind, missing in generated.short().items():
        why = ("the documents give no more candidates (more documents, or a smaller --chunk-size)"
               if kind in generated.exhausted else "raise generate.oversample or generate.max_rounds")
        say(f"note: {kind}: {missing} fewer than the {generated.quotas[kind]} asked after "
            f"{plural(generated.rounds, 'round')}: {why}")
    usage = client.usage
    say(f"judge: {usage.calls} requests sent, {usage.cache_hits} replies from the cache"
        + (f", {usage.failures} failed" if usage.failures else ""))
    counts = generated.counts()
    metrics = {"n_documents_covered": covered, "n_dropped": len(generated.dropped), "n_rounds": generated.rounds,
               **{f"n_{t}": v for t, v in got.items()},
               **{f"n_dropped_{reason}": counts.get(reason, 0) for reason in (*settings.checks, "failed", "surplus")},
               "n_requests": usage.calls, "n_cache_hits": usage.cache_hits}
    params = {"generator": records.GENERATOR, "mode": "llm", "judge.signature": client.signature(),
              "generate.mix": ",".join(f"{t}:{s:g}" for t, s in settings.mix.items()),
              "generate.checks": ",".join(settings.checks), "generate.oversample": str(settings.oversample),
              "generate.duplicate_threshold": str(settings.duplicate_threshold)}
    return params, metrics
