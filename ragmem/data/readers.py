"""Reading a data file into raw records (dicts), whatever its format: JSON (a list, or an object with
an ``examples``/``data``/``samples`` list), JSONL, CSV and Parquet. Validation of the records is
:mod:`ragmem.data.loaders`'s. Every problem is a :class:`ragmem.errors.DataError` naming the file (and
the line, for JSONL and for text that is not UTF-8).
"""

from __future__ import annotations

import ast
import codecs
import io
import json
import math
from pathlib import Path
from typing import Any, Iterable, Iterator

from ragmem.errors import DataError, failure_message
from ragmem.runtime.home import data_cache

FORMATS = ("json", "jsonl", "csv", "parquet")
_SUFFIX_FORMAT = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv",
                  ".parquet": "parquet", ".pq": "parquet"}


def detect_format(path: Path, format: str = "auto") -> str:
    if format != "auto":
        if format not in FORMATS:
            raise DataError(str(path), f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
        return format
    fmt = _SUFFIX_FORMAT.get(path.suffix.lower())
    if fmt is None:
        raise DataError(str(path), f"cannot tell the format from the suffix {path.suffix!r}; "
                                   f"use .json, .jsonl, .csv or .parquet, or set data.format")
    return fmt


def fetch_hint(path: Path) -> str:
    """For a missing file of a published dataset's folder in the home's cache (``fetched:NAME/...``
    in a config): the command that fetches it."""
    try:
        name = Path(path).resolve().relative_to(data_cache()).parts[0]
    except (ValueError, IndexError, OSError, RuntimeError):  # (RuntimeError: a symlink loop)
        return ""
    return f"; {name} is not fetched yet: run ragmem data fetch {name}"


def check_path(path: Path) -> None:
    """A data file that can be read: not missing, not a folder, not a device; a symlink loop or a
    permission problem named as such (:class:`DataError`)."""
    file = str(path)
    try:
        if path.is_dir():
            raise DataError(file, "is a folder; name a data file (.json, .jsonl, .csv or .parquet)")
        if not path.exists():
            raise DataError(file, ("file not found" if not path.is_symlink() else "a symlink to nothing (or a loop)")
                            + fetch_hint(path))
        if not path.is_file():
            raise DataError(file, "is not a regular file (a device, a pipe or a socket); name a data file")
        with open(path, "rb"):
            pass
    except DataError:
        raise
    except OSError as exc:  # ELOOP, EACCES, ENAMETOOLONG, ...
        raise DataError(file, f"cannot be read ({exc.strerror or exc})") from None


def _looks_like(path: Path) -> str:
    """What a file that is not its suffix's format looks like from its first bytes, as a hint for
    its error line: CSV, JSONL or Parquet given a .json name (``data.format`` says which)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return ""
    if head.startswith(b"PAR1"):
        return " (it looks like Parquet: name it .parquet or set data.format: parquet)"
    first = head.split(b"\n", 1)[0].strip()
    if first.startswith(b"{") and head.count(b"\n") > 1:
        return " (it looks like JSON Lines, one object per line: name it .jsonl or set data.format: jsonl)"
    if b"," in first and not first.startswith((b"{", b"[")):
        return " (it looks like CSV: name it .csv or set data.format: csv)"
    return ""


def not_utf8_message(path: Path, exc: UnicodeDecodeError, encoding: str = "utf-8",
                     setting: tuple[str, str] = ("set data.encoding, e.g. data.encoding: gb18030", "data.encoding")) -> str:
    """Where a file stops being text of ``encoding``: line and byte, and the setting that names
    another encoding (Chinese files saved by Excel are often GBK): ``setting``, how to give one and
    its name."""
    line = path.read_bytes()[: exc.start].count(b"\n") + 1
    name = "UTF-8" if _is_utf8(encoding) else encoding
    hint = (f"; if it is in another encoding (a Chinese file saved by Excel is often GBK), {setting[0]}"
            if _is_utf8(encoding) else f"; check {setting[1]}")
    return f"not {name} text (line {line}: byte 0x{exc.object[exc.start]:02x} at offset {exc.start}){hint}"


def read_json(path: Path) -> Any:
    """A UTF-8 JSON file read whole; a DataError naming the file and the line where it is not valid
    JSON, or where it is not UTF-8 (the memory benchmarks' files: LoCoMo, LongMemEval, BEAM)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(str(path), f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except UnicodeDecodeError as exc:
        raise DataError(str(path), not_utf8_message(path, exc)) from None


def check_encoding(encoding: str) -> str:
    """``encoding`` (``data.encoding``) when Python knows it, else a ValueError naming examples."""
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise ValueError(f"unknown text encoding {encoding!r} (e.g. utf-8, gb18030, big5, latin-1)") from None
    return encoding


def _is_utf8(encoding: str) -> bool:
    return encoding.lower().replace("_", "-") in ("utf-8", "utf8", "utf-8-sig")


def _text_encoding(encoding: str) -> str:
    """UTF-8 is read with a byte-order mark allowed (Excel writes one)."""
    return "utf-8-sig" if _is_utf8(encoding) else encoding


def read_records(path: Path, format: str = "auto", encoding: str = "utf-8") -> list[dict[str, Any]]:
    """Read a file into a list of raw records (dicts), without validating them; text formats are
    decoded with ``encoding`` (``data.encoding``)."""
    file = str(path)
    check_path(path)
    fmt = detect_format(path, format)
    text_encoding = _text_encoding(encoding)
    try:
        if fmt == "json":
            data = json.loads(path.read_text(encoding=text_encoding))
            if isinstance(data, dict):  # {"examples": [...]} or {"data": [...]}
                for key in ("examples", "data", "samples"):
                    if isinstance(data.get(key), list):
                        data = data[key]
                        break
            if not isinstance(data, list):
                raise DataError(file, "expected a JSON list of records (or an object with an "
                                      "'examples' list)")
            return data
        if fmt == "jsonl":
            records = []
            for n, line in enumerate(path.read_text(encoding=text_encoding).splitlines(), 1):
                if line.strip():
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise DataError(file, f"line {n} is not valid JSON ({exc.msg})") from None
            return records
        import pandas as pd  # pandas only for the tabular formats

        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding=text_encoding) if fmt == "csv" \
            else pd.read_parquet(path)
        return [_from_frame_row(row) for row in frame.to_dict(orient="records")]
    except DataError:
        raise
    except json.JSONDecodeError as exc:
        raise DataError(file, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
                              + _looks_like(path)) from None
    except UnicodeDecodeError as exc:
        raise DataError(file, not_utf8_message(path, exc, encoding)) from None
    except Exception as exc:  # pandas/pyarrow parse errors have many types
        raise DataError(file, f"cannot read as {fmt}: {failure_message(exc)}") from None


def iter_records(path: Path, format: str = "auto", encoding: str = "utf-8", batch: int = 10_000,
                 skip: int = 0, offset: int | None = None) -> Iterator[list[dict[str, Any]]]:
    """The raw records of a file in lists of at most ``batch``, read as they are needed: JSONL line
    by line, CSV by pandas' chunks, Parquet by pyarrow's record batches; a JSON document is parsed
    whole (it has no rows to stop between: a large dataset is JSONL, CSV or Parquet). The same
    records, and the same errors, as :func:`read_records`.

    From the ``skip + 1``-th record on: a JSONL file from the byte ``offset`` of that record's line
    when given (:func:`jsonl_offsets`), a Parquet file from the row group that holds it; otherwise
    the records before it are read and passed over (a CSV file's, parsed)."""
    fmt = detect_format(path, format)
    if fmt == "json":
        records = read_records(path, format, encoding)
        for start in range(skip, len(records), batch):
            yield records[start:start + batch]
        return
    file = str(path)
    check_path(path)
    try:
        if fmt == "jsonl":
            yield from _skipped(_jsonl_batches(path, _text_encoding(encoding), batch, offset or 0),
                                0 if offset is not None else skip)
            return
        import pandas as pd  # pandas and pyarrow only for the tabular formats

        if fmt == "csv":
            with pd.read_csv(path, dtype=str, keep_default_na=False, encoding=_text_encoding(encoding),
                             chunksize=batch) as chunks:
                frames = (frame.to_dict(orient="records") for frame in chunks)
                for rows in _skipped(frames, skip):
                    yield [_from_frame_row(row) for row in rows]
            return
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(path)
        groups: list[Any] = []
        before = 0
        for group in range(parquet.num_row_groups):
            rows = parquet.metadata.row_group(group).num_rows
            if before + rows > skip or groups:
                groups.append(group)
            else:
                before += rows
        batches = (part.to_pandas().to_dict(orient="records")
                   for part in parquet.iter_batches(batch_size=batch, row_groups=groups))
        for rows in _skipped(batches, skip - before):
            yield [_from_frame_row(row) for row in rows]
    except DataError:
        raise
    except UnicodeDecodeError as exc:
        raise DataError(file, not_utf8_message(path, exc, encoding)) from None
    except Exception as exc:  # pandas/pyarrow parse errors have many types
        raise DataError(file, f"cannot read as {fmt}: {failure_message(exc)}") from None


def _skipped(batches: Iterable[list], skip: int) -> Iterator[list]:
    """The batches without their first ``skip`` items."""
    for rows in batches:
        if skip >= len(rows):
            skip -= len(rows)
            continue
        yield rows[skip:] if skip else rows
        skip = 0


def _jsonl_batches(path: Path, encoding: str, batch: int, offset: int = 0) -> Iterator[list[dict[str, Any]]]:
    records: list = []
    with open(path, "rb") as raw:
        raw.seek(offset)
        handle = io.TextIOWrapper(raw, encoding=encoding)
        for n, line in enumerate(handle, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    where = f"line {n}" if not offset else f"line {n} after byte {offset}"
                    raise DataError(str(path), f"{where} is not valid JSON ({exc.msg})") from None
                if len(records) == batch:
                    yield records
                    records = []
    if records:
        yield records


def _from_frame_row(row: dict[str, Any]) -> dict[str, Any]:
    """Turn a pandas row into plain Python values (numpy arrays -> lists, NaN/'' -> missing)."""
    out = {}
    for key, value in row.items():
        if hasattr(value, "tolist"):
            value = value.tolist()
        if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
            continue
        out[str(key)] = value
    return out


def parse_embedded(value: Any) -> Any:
    """CSV cells hold lists/objects as JSON (or as Python reprs, as RAGAS exports them)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in "[{":
        return value
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return value


def jsonl_offsets(path: Path, encoding: str, records: Iterable[int], total: int) -> dict[int, int] | None:
    """The byte offset of the line of each record number in ``records`` (1-based, blank lines not
    counted) of a JSONL file of ``total`` records, from one pass over its bytes; None when its
    lines cannot be found by byte: UTF-16 or UTF-32 text, a carriage return that is not a line's
    last (text reading ends a line there), or a count of records other than ``total`` (a line of
    non-ASCII blanks only). A chunk is then found by reading from the start (``skip``)."""
    text_encoding = _text_encoding(encoding)
    if codecs.lookup(text_encoding).name.startswith(("utf-16", "utf-32")):
        return None
    wanted = sorted(set(records))
    found: dict[int, int] = {}
    position = record = 0
    with open(path, "rb") as handle:
        for line in handle:
            content = line.rstrip(b"\r\n")
            if b"\r" in content:
                return None
            if content.strip() and (len(content) > 64 or content.isascii()
                                    or content.decode(text_encoding, "replace").strip()):
                record += 1
                if len(found) < len(wanted) and record == wanted[len(found)]:
                    found[record] = position
            position += len(line)
    return found if record == total and len(found) == len(wanted) else None
