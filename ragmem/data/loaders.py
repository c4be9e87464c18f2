"""Dataset loading: JSON, JSONL, CSV and Parquet files in ragmem's, RAGAS's or DeepEval's field names.

Files are read by :mod:`ragmem.data.readers`; every record becomes an :class:`~ragmem.schema.Example`. Problems are collected per record with the
file, the record number (1-based, in file order) and the field, so ``ragmem validate`` can report all
of them and ``ragmem run`` can refuse bad data with one clear line instead of dropping records.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from ragmem.data import fields, given
from ragmem.data.readers import check_path, detect_format, iter_records, parse_embedded
from ragmem.errors import DataError
from ragmem.schema import Context, CONTEXT_SOURCES, Example, example_keys
from ragmem.text import plural

#: Canonical field -> accepted names, first match wins. ragmem/original, RAGAS, DeepEval/eval-lib.
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "query": ("query", "user_input", "question", "input"),
    "contexts": ("context", "contexts", "retrieved_contexts", "retrieval_context"),
    "generated_answer": ("generated_answer", "response", "answer", "actual_output"),
    "reference_answer": ("reference_answer", "reference", "ground_truth", "expected_output"),
}
_TRUE = {"1", "true", "yes", "y", "t"}
_FALSE = {"0", "false", "no", "n", "f"}


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset, with an optional file-level label (the original two-file layout)."""

    path: Path
    label: int | None = None
    format: str = "auto"
    coerce_numbers: bool = False  # data.coerce_numbers: a number where text is expected is read as text
    encoding: str = "utf-8"       # data.encoding of the text formats (JSON, JSONL, CSV)
    cluster_by: str | None = None  # stats.cluster_by: the field that names each example's cluster


@dataclass
class Dataset:
    """Loaded examples plus what identifies the data they came from.

    A dataset of more than ``chunk_size`` examples (``data.chunk_size``) is *streamed*: validated
    in one pass when loaded, but not held: ``examples`` is empty and :meth:`chunks` reads the files
    again, ``chunk_size`` examples at a time."""

    examples: list[Example]
    files: list[DataFile]
    sha256: str
    n: int | None = None               # the number of examples (len(examples) when they are held)
    chunk_size: int | None = None      # None: one chunk
    require_answer: bool = True
    records: list[int] | None = None   # each file's number of examples
    #: how many examples hold a reference answer, and gold context ids (counted when loaded)
    with_reference: int | None = None
    with_gold: int | None = None
    with_history: int | None = None    # ... and turns of a conversation (history: their earlier turns)

    def __len__(self) -> int:
        return len(self.examples) if self.n is None else self.n

    @property
    def streamed(self) -> bool:
        return len(self.examples) < len(self)

    def ids(self) -> set[str]:
        return {e.id for chunk in self.chunks() for e in chunk}

    def chunks(self) -> Iterator[list[Example]]:
        """The examples in order, ``chunk_size`` at a time (held ones sliced; streamed ones read again)."""
        size = self.chunk_size or max(1, len(self))
        if not self.streamed:
            for start in range(0, len(self.examples), size):
                yield self.examples[start:start + size]
            return
        chunk: list[Example] = []
        for data_file in self.files:
            for example in read_examples(data_file, self.require_answer, batch=min(size, 10_000)):
                chunk.append(example)
                if len(chunk) == size:
                    yield chunk
                    chunk = []
        if chunk:
            yield chunk


def read_examples(data_file: DataFile, require_answer: bool, skip: int = 0, count: int | None = None,
                  offset: int | None = None, batch: int = 10_000) -> Iterator[Example]:
    """The examples of a file validated before (:func:`load_dataset`), read again: ``count`` of them
    (all: None) after the first ``skip`` (a JSONL file from the byte ``offset`` of the first's line)."""
    tabular, record = detect_format(data_file.path, data_file.format) in ("csv", "parquet"), skip
    for raw_batch in iter_records(data_file.path, data_file.format, data_file.encoding, batch, skip, offset):
        for raw in raw_batch:
            if count is not None and record == skip + count:
                return
            record += 1
            example, problems = parse_record(raw, given.shown(data_file.path), record, data_file.label,
                                             require_answer, data_file.coerce_numbers, tabular, data_file.cluster_by)
            if problems:  # validated when loaded: the file changed since
                raise DataError(given.shown(data_file.path), "changed since it was loaded: " + problems[0].detail,
                                record, problems[0].field)
            assert example is not None  # (a record without problems is parsed)
            yield example


def parse_label(value: Any) -> int:
    """1/0, true/false, yes/no (any case) -> 1 or 0; anything else raises ValueError."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return 1
    if text in _FALSE:
        return 0
    raise ValueError(f"expected 1/0 or true/false, got {value!r}")


def _is_number(value: Any) -> bool:  # a finite int or float, not a bool
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class _RecordReader:
    """Turns one raw record into an Example, collecting every problem instead of stopping at one."""

    def __init__(self, file: str, record: int, raw: Any, coerce_numbers: bool = False, tabular: bool = False):
        self.file, self.record, self.raw = file, record, raw
        self.coerce_numbers, self.tabular = coerce_numbers, tabular
        self.problems: list[DataError] = []

    def as_text(self, name: str, value: Any) -> str | None:
        """``value`` when it is a string; a finite number as its JSON text with ``data.coerce_numbers``;
        anything else (NaN, Infinity, null, true, a list) is a problem, never silently stringified."""
        if isinstance(value, str):
            problem = fields.text_problem(value)
            if problem:
                self.problem(name, problem)
                return None
            return value
        if isinstance(value, float) and not math.isfinite(value):
            self.problem(name, f"expected a string, got {json.dumps(value)}")
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if self.coerce_numbers:
                return json.dumps(value)
            self.problem(name, f"expected a string, got the number {json.dumps(value)} "
                               f"(data.coerce_numbers: true reads numbers as text)")
            return None
        got = "null" if value is None else json.dumps(value) if isinstance(value, bool) else type(value).__name__
        self.problem(name, f"expected a string, got {got}")
        return None

    def problem(self, field: str | None, message: str) -> None:
        self.problems.append(DataError(self.file, message, self.record, field))

    def pick(self, canonical: str) -> tuple[str | None, Any]:
        present = [name for name in FIELD_ALIASES[canonical] if name in self.raw]
        if len(present) > 1 and len({json.dumps(self.raw[n], sort_keys=True, default=str)
                                     for n in present}) > 1:
            self.problem(present[1], f"conflicts with '{present[0]}' (both name the {canonical})")
        return (present[0], self.raw[present[0]]) if present else (None, None)

    def text(self, canonical: str, required: bool) -> str | None:
        name, value = self.pick(canonical)
        if name is None:
            if required:
                self.problem(FIELD_ALIASES[canonical][0],
                             f"missing (accepted names: {', '.join(FIELD_ALIASES[canonical])})")
            return None
        value = self.as_text(name, value)
        if value is None:
            return None
        if required and not value.strip():
            self.problem(name, "is empty")
        return value

    def identifier(self, name: str, value: Any, optional: bool = True) -> str | None:
        """An id: a string or an integer (``7`` and ``"7"`` are the same id); nothing else
        (``None`` when ``optional`` and absent)."""
        if value is None and optional:
            return None
        if isinstance(value, str):
            problem = fields.id_problem(value)
            if problem:
                self.problem(name, problem)
                return None
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        self.problem(name, f"expected a string or an integer id, got {json.dumps(value, default=str)}")
        return None

    def contexts(self) -> list[Context]:
        name, value = self.pick("contexts")
        if name is None:
            return []
        value = parse_embedded(value)
        if isinstance(value, str) and self.tabular:  # a CSV/Parquet cell of plain text: one context
            value = [value]
        if not isinstance(value, list):
            got = "a string (write [\"...\"] for one context)" if isinstance(value, str) else type(value).__name__
            self.problem(name, f"expected a list of strings or objects, got {got}")
            return []
        out = []
        for i, item in enumerate(value):
            where = f"{name}[{i}]"
            if not isinstance(item, dict):
                text = self.as_text(where, item)
                if text is not None:
                    out.append(Context(text=sys.intern(text)))
                continue
            key = "text" if "text" in item else "content"
            if key not in item:
                self.problem(where, "object needs a string 'text'")
                continue
            text = self.as_text(f"{where}.{key}", item[key])
            if text is None:
                continue
            source = item.get("source")
            if source is not None and source not in CONTEXT_SOURCES:
                self.problem(f"{where}.source", f"{source!r} is not one of {', '.join(CONTEXT_SOURCES)}")
                source = None
            score = item.get("score")
            if score is not None and not _is_number(score):
                self.problem(f"{where}.score", f"expected a number, got {score!r}")
                score = None
            cid = self.identifier(f"{where}.id", item.get("id"))
            # interned: the same context recurs across examples (one copy of each, not one per example)
            out.append(Context(text=sys.intern(text), id=cid, source=source,
                               score=None if score is None else float(score)))
        return out

    def optional(self, file_label: int | None) -> dict[str, Any]:
        raw, out = self.raw, dict[str, Any]()
        if "label" in raw:
            try:
                out["label"] = parse_label(raw["label"])
            except ValueError as exc:
                self.problem("label", str(exc))
            else:
                if file_label is not None and out["label"] != file_label:
                    self.problem("label", f"is {out['label']} but the file is labelled {file_label}")
        elif file_label is not None:
            out["label"] = file_label
        if "latency_ms" in raw:
            value = raw["latency_ms"]
            try:
                value = float(value)
            except (TypeError, ValueError):
                self.problem("latency_ms", f"expected a number of milliseconds, got {value!r}")
            else:
                if not math.isfinite(value) or value < 0:
                    self.problem("latency_ms", f"must be a finite number >= 0, got {value!r}")
                else:
                    out["latency_ms"] = value
        if "timings_ms" in raw:
            value = parse_embedded(raw["timings_ms"])
            if not isinstance(value, dict) or not all(
                    _is_number(v) and v >= 0 for v in value.values()):
                self.problem("timings_ms", "expected an object of stage -> milliseconds (numbers >= 0)")
            else:
                out["timings_ms"] = {str(k): float(v) for k, v in value.items()}
        for key in ("session_id", "trace_id", "user_id"):
            if key in raw:
                value = self.identifier(key, raw[key])
                if value is not None:
                    out[key] = value
        if raw.get("agent_error") is not None:
            value = self.as_text("agent_error", raw["agent_error"])
            if value is not None:
                out["agent_error"] = value
        if "tokens" in raw:
            value = parse_embedded(raw["tokens"])
            if not isinstance(value, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                      for v in value.values()):
                self.problem("tokens", "expected an object of kind -> count (integers >= 0)")
            else:
                out["tokens"] = {str(k): v for k, v in value.items()}
        if "history" in raw:
            value = parse_embedded(raw["history"])
            if not isinstance(value, list) or not all(
                    isinstance(t, dict) and isinstance(t.get("content"), str) for t in value):
                self.problem("history", "expected a list of {role, content} turns")
            else:
                out["history"] = [{"role": str(t.get("role", "user")), "content": t["content"]}
                                  for t in value]
        if "relevant_context_ids" in raw:
            value = parse_embedded(raw["relevant_context_ids"])
            if not isinstance(value, list):
                self.problem("relevant_context_ids", "expected a list of context ids")
            else:
                ids = [self.identifier(f"relevant_context_ids[{i}]", v, optional=False) for i, v in enumerate(value)]
                out["relevant_context_ids"] = [v for v in ids if v is not None]
        if "relevance" in raw:
            value = parse_embedded(raw["relevance"])
            if not isinstance(value, dict) or not all(_is_number(v) and v >= 0 for v in value.values()):
                self.problem("relevance", "expected an object of context id -> grade (numbers >= 0)")
            else:
                out["relevance"] = {str(k): float(v) for k, v in value.items()}
        return out


def parse_record(raw: Any, file: str, record: int, file_label: int | None = None,
                 require_answer: bool = True, coerce_numbers: bool = False,
                 tabular: bool = False, cluster_by: str | None = None) -> tuple[Example | None, list[DataError]]:
    """Validate one raw record; return the Example (None when invalid) and every problem found.
    ``tabular``: the record is a CSV/Parquet row (a plain-text contexts cell is one context);
    ``cluster_by``: the field naming the example's cluster (``stats.cluster_by``; absent or empty:
    a cluster of its own)."""
    reader = _RecordReader(file, record, raw, coerce_numbers, tabular)
    if not isinstance(raw, dict):
        reader.problem(None, f"expected an object, got {type(raw).__name__}")
        return None, reader.problems
    query = reader.text("query", required=True)
    # optional (production traffic has none): the metrics that need it say so; null or blank is none
    name, value = reader.pick("reference_answer")
    reference = reader.as_text(name, value) if name is not None and value is not None else None
    reference = reference if reference is not None and reference.strip() else None
    optional = reader.optional(file_label)
    # a recorded failed call (agent_error: a trace that ended in error) has no answer to require
    answer = reader.text("generated_answer", required=require_answer and "agent_error" not in optional)
    contexts = reader.contexts()
    rid = reader.identifier("id", raw.get("id"))
    cluster = reader.identifier(cluster_by, raw.get(cluster_by)) if cluster_by else None
    label_answer, problem = fields.label_answer(raw, optional.get("label"), answer)
    if problem:
        reader.problem("label_answer_sha256", problem)
    if reader.problems:
        return None, reader.problems
    example = Example(
        id=rid if rid is not None else f"{Path(file).stem}:{record}",
        query=query or "", reference_answer=reference, contexts=contexts,
        generated_answer=answer, source_file=file, record=record, cluster=cluster or None,
        label_answer=label_answer, **optional)
    return example, []


def load_dataset(files: Iterable[DataFile], require_answer: bool = True, chunk_size: int | None = None) -> Dataset:
    """Load and validate every file; raise the first problem (with a count of the rest).

    ``require_answer`` is False when a live agent produces the answers. A run loads its data once,
    before any work (:mod:`ragmem.run.prepare`), and hands the :class:`Dataset` down. The files are
    read in batches and checked record by record; with more than ``chunk_size`` examples
    (``data.chunk_size``) they are not kept (a streamed :class:`Dataset`).
    """
    files = list(files)
    kept: list[Example] = []
    keys: list = []
    digest = hashlib.sha256()
    records = []
    held = {"reference": 0, "gold": 0, "history": 0}
    for data_file in files:
        records.append(_scan(data_file, require_answer, kept, keys, chunk_size, held))
        with open(data_file.path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(f"|label={data_file.label}|".encode())
    n = sum(records)
    dataset = Dataset(kept if chunk_size is None or n <= chunk_size else [], files, digest.hexdigest(), n,
                      chunk_size, require_answer, records, held["reference"], held["gold"], held["history"])
    _refuse_duplicates(dataset, keys)
    return dataset


def _scan(data_file: DataFile, require_answer: bool, kept: list[Example], keys: list, chunk_size: int | None,
          held: dict[str, int]) -> int:
    """Validate one file record by record; keep its examples while the dataset stays within
    ``chunk_size``, each id's 64-bit key (duplicates: :func:`_refuse_duplicates`), and count in
    ``held`` the examples with a reference answer, with gold ids and with earlier turns (history)."""
    file = given.shown(data_file.path)
    check_path(data_file.path)
    tabular = detect_format(data_file.path, data_file.format) in ("csv", "parquet")
    first, more, record = None, 0, 0
    # (read in batches of at most a chunk: a batch of 10,000 heavy records, each with its conversation's
    # turns, held 100 MB more than a chunk of 2,000 while a 20,000-trace window was checked)
    size = min(chunk_size or 10_000, 10_000)
    for batch in iter_records(data_file.path, data_file.format, data_file.encoding, batch=size):
        ids = []
        for raw in batch:
            record += 1
            example, problems = parse_record(raw, file, record, data_file.label, require_answer,
                                             data_file.coerce_numbers, tabular, data_file.cluster_by)
            if problems:
                more += len(problems) - (first is None)
                first = first or problems[0]
                continue
            assert example is not None  # (a record without problems is parsed)
            ids.append(example.id)
            held["reference"] += example.reference_answer is not None
            held["gold"] += example.relevant_context_ids is not None or example.relevance is not None
            held["history"] += bool(example.history)
            if chunk_size is None or len(kept) < chunk_size + 1:
                kept.append(example)
        keys.append(example_keys(ids))
    if first is None and record == 0:
        first = DataError(file, "holds no records")
    if first is not None:
        suffix = f" (and {plural(more, 'more problem')}; run `ragmem validate {data_file.path}`)" if more else ""
        raise DataError(first.file, first.detail + suffix, first.record, first.field)
    return record


def _refuse_duplicates(dataset: Dataset, keys: list) -> None:
    """An id that two examples share, named with both places (found by their 64-bit keys, then
    the ids of the colliding keys read again)."""
    every = np.concatenate(keys) if keys else np.zeros(0, dtype=np.uint64)
    ordered = np.sort(every)
    twice = set(ordered[1:][ordered[1:] == ordered[:-1]].tolist())
    if not twice:
        return
    seen: dict[str, Example] = {}
    for chunk in dataset.chunks():
        for example, key in zip(chunk, example_keys([e.id for e in chunk]).tolist()):
            if key not in twice:
                continue
            if example.id in seen:
                other = seen[example.id]
                if other.source_file == example.source_file:
                    detail = f"duplicate id {example.id!r} (also record {other.record})"
                else:
                    detail = f"duplicate id {example.id!r} (also {other.source_file} record {other.record})"
                raise DataError(example.source_file, detail, example.record, "id")
            seen[example.id] = example
