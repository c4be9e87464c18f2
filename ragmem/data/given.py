"""Records given as Python objects (``ragmem.evaluate(data=...)``): a list of dicts, a pandas
DataFrame, a pyarrow Table or any iterable of records.

They are written once to a JSON Lines file in the ragmem home, named by the digest of its content
(``<home>/given/records-<sha256[:16]>.jsonl``), and from there on they are a data file like any
other: the same record checks and messages (``the records given to ragmem.evaluate: record 3: field
'query': missing``, records numbered from 1 in the order given), the same digest, streaming and
resume (the same records give the same file). A missing cell of a table (``None``, ``NaN``) is an
absent field, as a blank CSV cell is; numpy values are their Python ones.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from pathlib import Path
from typing import Any, Iterable

from ragmem.errors import DataError
from ragmem.runtime.home import ragmem_home

FOLDER = "given"
SHOWN = "the records given to ragmem.evaluate"


def is_given(path: str | Path) -> bool:
    """Whether ``path`` is a file of given records (:func:`records_file`)."""
    path = Path(path)
    return path.parent.name == FOLDER and path.name.startswith("records-") and path.suffix == ".jsonl"


def shown(path: str | Path) -> str:
    """How a data file is named in messages: given records as such, a file by its path."""
    return SHOWN if is_given(path) else str(path)


def is_records(data: Any) -> bool:
    """Whether ``data`` is records rather than a file or a list of ``{path, label?}`` file entries."""
    if data is None or isinstance(data, (str, bytes, os.PathLike)):
        return False
    if isinstance(data, list) and data and all(isinstance(d, dict) and "path" in d and len(d.keys() - {
            "path", "label", "format"}) == 0 for d in data):
        return False  # data.files entries
    return True


def records_file(data: Any) -> Path:
    """The given records (:func:`is_records`) as a JSON Lines file in the ragmem home; its path."""
    lines = (json.dumps(_plain_record(record, i), ensure_ascii=False, allow_nan=False)
             for i, record in enumerate(_rows(data), 1))
    path = write_lines(lines, FOLDER, "records")
    if path is None:
        raise DataError(SHOWN, "holds no records")
    return path


def write_lines(lines: Iterable[str], folder: str, prefix: str) -> Path | None:
    """``lines`` (JSON texts) as a JSON Lines file ``<home>/<folder>/<prefix>-<sha256[:16]>.jsonl``,
    named by the digest of its content (the same records: the same file, so a resume finds its
    data), written as they come (memory stays bounded) and put in place whole. ``None``: no lines."""
    target = ragmem_home() / folder
    target.mkdir(parents=True, exist_ok=True)
    partial = target / f".{prefix}.{os.getpid()}.{threading.get_ident()}.partial"
    digest, written = hashlib.sha256(), 0
    try:
        with open(partial, "wb") as handle:
            for line in lines:
                data = (line + "\n").encode("utf-8")
                digest.update(data)
                handle.write(data)
                written += 1
        if not written:
            return None
        path = target / f"{prefix}-{digest.hexdigest()[:16]}.jsonl"
        if not (path.is_file() and path.stat().st_size == partial.stat().st_size):
            os.replace(partial, path)
        return path
    finally:
        partial.unlink(missing_ok=True)


def _rows(data: Any) -> Iterable[Any]:
    """The records of a DataFrame, a pyarrow Table, or any iterable (a list, a generator)."""
    if type(data).__module__.startswith("pandas") and hasattr(data, "to_dict"):
        return data.to_dict("records")
    if type(data).__module__.startswith("pyarrow") and hasattr(data, "to_pylist"):
        return data.to_pylist()
    if isinstance(data, dict):
        raise DataError(SHOWN, "expected records (a list of dicts, a DataFrame, a pyarrow Table), got one dict")
    try:
        return iter(data)
    except TypeError:
        raise DataError(SHOWN, f"expected records (a list of dicts, a DataFrame, a pyarrow Table), got "
                               f"{type(data).__name__}") from None


def _plain_record(record: Any, number: int) -> Any:
    """A record as JSON can hold it: missing cells left out, numpy values as Python's. What is not a
    record is left for the record checks to name (``expected an object``)."""
    if not isinstance(record, dict):
        return record if isinstance(record, (str, int, float, bool, list)) or record is None else repr(record)
    out = {}
    for key, value in record.items():
        value = _plain(value, number, str(key))
        if value is not None:
            out[str(key)] = value
    return out


def _plain(value: Any, number: int, field: str) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None  # a missing cell
    if hasattr(value, "tolist") and type(value).__module__ == "numpy":  # an array or a numpy scalar
        value = value.tolist()
    if isinstance(value, float) and math.isinf(value):
        raise DataError(SHOWN, f"{value}: not a value JSON can hold", number, field)
    if isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v, number, field) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v, number, field) for k, v in value.items()}
    if type(value).__module__.startswith("pandas") and str(value) in ("NaT", "<NA>"):
        return None
    raise DataError(SHOWN, f"a {type(value).__name__} cannot be read as data (text, numbers, lists and "
                           f"objects can)", number, field)
