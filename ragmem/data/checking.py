"""``ragmem validate``: every record of a file checked, a batch at a time, every problem reported
with its record and field, and ids given twice found; the same record checks as a run's
(:func:`ragmem.data.loaders.parse_record`), in memory bounded by the batch (a 1 GB JSONL held every
example before: 6.9 GB)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ragmem.data import given
from ragmem.data.loaders import DataFile, Example, parse_record
from ragmem.data.readers import check_path, detect_format, iter_records
from ragmem.errors import DataError
from ragmem.schema import example_keys


@dataclass
class FileReport:
    """What validating one file found."""

    file: str
    n_records: int
    problems: list[DataError]
    examples: list[Example]
    #: how many valid records each of ``count``'s predicates held for
    held: dict[str, int] = field(default_factory=dict)


def check_file(data_file: DataFile, require_answer: bool = True, keep: bool = True,
               on_batch=None, count: dict[str, Callable[[Example], bool]] | None = None) -> FileReport:
    """Read and validate every record of one file, a batch at a time; never raises for a bad record.
    ``keep``: hold the valid examples in the report (``ragmem validate`` does not: a 1 GB file is
    read in bounded memory, its ids held as 8-byte keys for the duplicate check); ``on_batch(n)``:
    called with each batch's record count (progress); ``count``: predicates of a valid example, each
    counted in the report's ``held`` (what the metrics can be computed on:
    :func:`ragmem.metrics.needs.fed_counters`)."""
    file = given.shown(data_file.path)
    check_path(data_file.path)
    tabular = detect_format(data_file.path, data_file.format) in ("csv", "parquet")
    problems: list[DataError] = []
    examples: list[Example] = []
    keys, records, record = [], [], 0
    count = count or {}
    held = dict.fromkeys(count, 0)
    for batch in iter_records(data_file.path, data_file.format, data_file.encoding):
        ids, numbers = [], []
        for raw in batch:
            record += 1
            example, found = parse_record(raw, file, record, data_file.label, require_answer, data_file.coerce_numbers,
                                          tabular, data_file.cluster_by)
            problems.extend(found)
            if example is not None:
                for name, holds in count.items():
                    held[name] += holds(example)
                ids.append(example.id)
                numbers.append(record)
                if keep:
                    examples.append(example)
        keys.append(example_keys(ids))
        records.append(np.array(numbers, dtype=np.int64))
        if on_batch is not None:
            on_batch(len(batch))
    problems += _duplicates(data_file, np.concatenate(keys) if keys else np.zeros(0, dtype=np.uint64),
                            np.concatenate(records) if records else np.zeros(0, dtype=np.int64))
    if not record:
        problems.append(DataError(file, "holds no records"))
    return FileReport(file, record, problems, examples, held)


def _duplicates(data_file: DataFile, keys: np.ndarray, records: np.ndarray) -> list[DataError]:
    """Each id given again in a file, on the record that repeats it (ids across files: :func:`load_dataset`),
    found by the ids' 64-bit keys, the colliding records read again for their ids."""
    order = np.argsort(keys, kind="stable")
    repeated = np.flatnonzero(keys[order][1:] == keys[order][:-1])
    if not repeated.size:
        return []
    wanted = {int(records[order[i]]) for i in repeated} | {int(records[order[i + 1]]) for i in repeated}
    ids, record = {}, 0
    tabular = detect_format(data_file.path, data_file.format) in ("csv", "parquet")
    for batch in iter_records(data_file.path, data_file.format, data_file.encoding):
        for raw in batch:
            record += 1
            if record in wanted:
                example, _ = parse_record(raw, given.shown(data_file.path), record, data_file.label, False,
                                          data_file.coerce_numbers, tabular, data_file.cluster_by)
                if example is not None:  # (the wanted records are valid ones)
                    ids[record] = example.id
    first: dict[str, int] = {}
    out = []
    for number in sorted(ids):
        if ids[number] in first:
            out.append(DataError(str(data_file.path), f"duplicate id {ids[number]!r} (also record {first[ids[number]]})",
                                 number, "id"))
        first.setdefault(ids[number], number)
    return out


def questions_only(report: FileReport, data_file: DataFile, count: dict[str, Callable[[Example], bool]] | None = None,
                   on_batch=None) -> FileReport | None:
    """The file read again without requiring answers, when every record of it is invalid for its
    missing answer alone: a test set, questions for an agent to answer (as ``ragmem generate``
    writes them); else ``None``. A file where some records have answers and others not stays invalid."""
    missing = {p.record for p in report.problems if p.field == "generated_answer"}
    if not report.n_records or len(missing) != report.n_records or any(p.field != "generated_answer"
                                                                        for p in report.problems):
        return None
    again = check_file(data_file, require_answer=False, keep=False, on_batch=on_batch, count=count)
    return again if not again.problems else None
