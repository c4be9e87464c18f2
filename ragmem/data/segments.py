"""Where each chunk of a streamed dataset lies in its files, and a chunk read from there alone:
what a Dask worker is sent instead of the rows (``orchestration.task_runner: dask``, see
:func:`ragmem.run.batching.score_bounds`).

A chunk is ``data.chunk_size`` examples in file order (the last one fewer), as
:meth:`ragmem.data.loaders.Dataset.chunks` reads them; it may end in one file and go on in the next, so
its bounds are a list of :class:`Segment`. A segment is found in its file:

- JSONL: by the byte offset of its first record's line, from one pass over the file's bytes when
  the bounds are made (:func:`ragmem.data.readers.jsonl_offsets`); a file whose lines cannot be found by
  byte (UTF-16, lines ended by a lone carriage return) is read from its start, the records before
  the segment passed over;
- Parquet: from the row group that holds its first record (the groups before are not read);
- CSV and JSON: read from the start, the records before the segment parsed and passed over (a
  large dataset is best JSONL or Parquet).
"""

from __future__ import annotations

from dataclasses import dataclass

from ragmem.data.loaders import DataFile, Dataset, read_examples
from ragmem.data.readers import detect_format, jsonl_offsets
from ragmem.schema import Example

__all__ = ["Segment", "bounds", "read"]


@dataclass(frozen=True)
class Segment:
    """``count`` examples of one file, after its first ``skip``."""

    file: DataFile
    skip: int
    count: int
    offset: int | None = None  # JSONL: the byte offset of the first one's line (None: read from the start)


def bounds(dataset: Dataset) -> list[list[Segment]]:
    """Each chunk of the dataset (:meth:`~ragmem.data.loaders.Dataset.chunks`), as the segments of files it reads."""
    size = dataset.chunk_size or max(1, len(dataset))
    records = dataset.records if dataset.records is not None else [len(dataset)]
    chunks: list[list[tuple[int, int, int]]] = [[]]
    room = size
    for index, total in enumerate(records):
        done = 0
        while done < total:
            if room == 0:
                chunks.append([])
                room = size
            take = min(room, total - done)
            chunks[-1].append((index, done, take))
            done, room = done + take, room - take
    offsets = {}
    for index, (data_file, total) in enumerate(zip(dataset.files, records)):
        if detect_format(data_file.path, data_file.format) == "jsonl":
            starts = [skip + 1 for chunk in chunks for i, skip, _ in chunk if i == index]
            offsets[index] = jsonl_offsets(data_file.path, data_file.encoding, starts, total) or {}
    return [[Segment(dataset.files[i], skip, count, offsets.get(i, {}).get(skip + 1)) for i, skip, count in chunk]
            for chunk in chunks if chunk]


def read(segments: list[Segment], require_answer: bool) -> list[Example]:
    """One chunk's examples, read from its files (validated when the dataset was loaded: a record
    that has changed since is refused with its file, record and field)."""
    return [example for segment in segments
            for example in read_examples(segment.file, require_answer, segment.skip, segment.count, segment.offset,
                                         batch=min(segment.count, 10_000))]
