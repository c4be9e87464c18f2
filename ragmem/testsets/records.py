"""A generated test set as ragmem's data format, and what was dropped as its side file.

Each kept question: ``id``, ``query``, ``reference_answer``, ``relevant_context_ids`` and
``reference_contexts`` (the chunks it was written from; none for an unanswerable question, whose
reference answer is the abstention of its language), ``question_type`` and ``provenance`` (the
documents, source files and chunks, the generator and its prompts' version, the model and endpoint,
the seed, the terms linking two chunks, each check's verdict, the language, the chunking, ragmem's
version). The side file (``FILE.dropped.jsonl``) holds every candidate not kept: its type, chunks,
question and answer (when written), the reason (a check's name, ``failed``, ``surplus``) and the
detail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from ragmem.prompts.generation import GENERATION_VERSION, generation_hash
from ragmem.testsets.probes import language
from ragmem.testsets.writing import ABSTAIN, Generated, Written
from ragmem.version import __version__

GENERATOR = "llm-writer-2026-12-04.1"


def side_file(output: Path) -> Path:
    """Where the dropped candidates go: ``testset.jsonl`` -> ``testset.dropped.jsonl``."""
    return output.with_name(f"{output.stem}.dropped.jsonl")


def kept_records(generated: Generated, sources: dict[str, str], *, model: str, endpoint: str, seed: int,
                 chunking: str, keywords: str) -> list[dict[str, Any]]:
    """The kept questions as records (module docstring), numbered in the order they were kept."""
    rows = []
    for i, w in enumerate(generated.kept, 1):
        chunks = w.candidate.chunks
        unanswerable = w.candidate.type == "unanswerable"
        lang = language(chunks[0].text)
        row: dict[str, Any] = {"id": f"gen-{i:05d}", "query": w.question,
                               "reference_answer": ABSTAIN[lang] if unanswerable else w.answer}
        if not unanswerable:
            row["relevant_context_ids"] = [c.id for c in chunks]
            row["reference_contexts"] = [c.text for c in chunks]
        row["question_type"] = w.candidate.type
        row["provenance"] = {
            "documents": [c.doc_id for c in chunks], "sources": [sources.get(c.doc_id) for c in chunks],
            "chunks": [c.id for c in chunks], "generator": GENERATOR,
            "prompts": f"{GENERATION_VERSION}#{generation_hash()}", "model": model, "endpoint": endpoint,
            "seed": seed, "round": w.round, "link": list(w.candidate.link) or None,
            "written_answer": w.answer if unanswerable else None,
            "checked_against": [c.id for c in w.contexts] if unanswerable else None,
            "checks": dict(w.checks), "language": lang, "keywords": keywords, "chunking": chunking,
            "ragmem": __version__}
        rows.append(row)
    return rows


def dropped_records(dropped: Sequence[Written]) -> list[dict[str, Any]]:
    """Every candidate not kept, with why (module docstring)."""
    return [{"type": w.candidate.type, "chunks": [c.id for c in w.candidate.chunks], "round": w.round,
             "question": w.question, "answer": w.answer, "reason": w.dropped, "detail": w.detail,
             "checks": dict(w.checks)} for w in dropped]


def write_rows(path: Path, rows: list[dict]) -> None:
    """JSON lines, or one JSON list when the name ends in .json; written whole or not at all (a
    temporary file renamed; removed when the write fails, as :func:`ragmem.run.summary.write_json`'s)."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        with open(partial, "w", encoding="utf-8") as out:
            if path.suffix.lower() == ".json":
                json.dump(rows, out, ensure_ascii=False, indent=1)
            else:
                out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def survival(generated: Generated, enabled: Sequence[str]) -> list[str]:
    """One line per check (how many candidates it looked at, passed and dropped), and one each for
    the requests that failed and the surplus."""
    everyone = generated.kept + list(generated.dropped)
    counts = generated.counts()
    failed = [w for w in generated.dropped if w.dropped == "failed"]
    unwritten = sum(w.question is None for w in failed)
    lines = [f"written: {len(everyone) - unwritten} of {len(everyone)} candidates"
             + (f" ({unwritten} failed: see the side file)" if unwritten else "")]
    for check in enabled:
        looked = sum(check in w.checks or w.dropped == check for w in everyone)
        lines.append(f"{check}: {looked - counts.get(check, 0)} of {looked} passed, {counts.get(check, 0)} dropped")
    if len(failed) > unwritten:
        lines.append(f"not checked: {len(failed) - unwritten} written questions whose check request failed "
                     "(see the side file)")
    if counts.get("surplus"):
        lines.append(f"surplus: {counts['surplus']} passed every check after their type's quota was met")
    return lines
