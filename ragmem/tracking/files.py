"""The artifact files of a run written before they are logged: the per-example table (Parquet,
and below ``tracking.table_copies_max_rows`` rows CSV and MLflow's table JSON too) and the plots. Plain functions of their inputs, with no MLflow call, so that
:func:`ragmem.tracking.record_run` makes them on a thread while this process logs everything else,
the table flattened once for all its files; :class:`ragmem.tracking.Tracker` then logs the files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import orjson
import pandas as pd


#: ``tracking.table_copies_max_rows``'s default: above it the per-example table is logged as Parquet only
COPIES_MAX_ROWS = 50_000


def table_kinds(n_rows: int, copies_max_rows: int = COPIES_MAX_ROWS) -> tuple[str, ...]:
    """The files a per-example table of ``n_rows`` is logged as: Parquet always (what ragmem reads
    back), CSV and MLflow's table JSON while ``n_rows <= copies_max_rows`` (at 1M rows the two
    copies would be gigabytes of text written and uploaded for nobody's spreadsheet)."""
    return ("parquet", "csv", "json") if n_rows <= copies_max_rows else ("parquet",)


def table_file(table: pd.DataFrame, folder: str | Path, name: str, kind: str) -> str:
    """``<name>.parquet`` (``kind="parquet"``: what :func:`ragmem.tracking.runs.load_run_table` reads),
    ``<name>.csv`` (``"csv"``, for spreadsheets) or ``<name>.json`` (``"json"``: MLflow's table
    format, ``{"columns", "data"}``, for the UI's Evaluation/Artifacts view) in ``folder``; list and
    dict cells as JSON text. Floats with 15 significant digits in the JSON (pandas' most;
    ``MlflowClient.log_table`` keeps 10); exact in the Parquet."""
    return _write(_flat(table), folder, name, kind)


def table_files(table: pd.DataFrame, folder: str | Path, name: str, kinds: Sequence[str] | None = None) -> list[str]:
    """The table's files of ``kinds`` (default: :func:`table_kinds` of its rows), from one flattened copy."""
    flat = _flat(table)
    return [_write(flat, folder, name, kind) for kind in (table_kinds(len(flat)) if kinds is None else kinds)]


def _flat(table: pd.DataFrame) -> pd.DataFrame:
    flat = table.copy(deep=False)  # (copy-on-write: the columns replaced below are new, the others shared)
    flat.attrs = {}  # a table read back carries its MLflow run: not a part of the file
    encoded = []
    for column in flat.columns[flat.dtypes == object]:
        cells = flat[column].tolist()
        if any(isinstance(v, (list, dict)) for v in cells):
            flat[column] = [dumps(v) if isinstance(v, (list, dict)) else v for v in cells]
            encoded.append(column)
    flat.attrs[JSON_COLUMNS] = encoded  # (the Parquet file says which: read_table decodes them)
    return flat


JSON_COLUMNS = "ragmem.json_columns"


def dumps(value: Any) -> str:
    """A list or dict cell as compact JSON text (orjson: at 100k examples the contexts, the relevance
    and the BLEU/chrF statistics took 5.6 s with ``json.dumps``, 1.0 s with it); a value orjson
    cannot write (a number too large for 64 bits) through ``json.dumps``."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _write(flat: pd.DataFrame, folder: str | Path, name: str, kind: str) -> str:
    path = Path(folder) / f"{name}.{kind}"
    if kind == "parquet":
        write_parquet(flat, path)
    elif kind == "csv":
        flat.to_csv(path, index=False)
    else:
        _write_split_json(flat, path)
    return str(path)


#: rows of MLflow's table JSON made into text at a time
JSON_ROWS = 2000


def _write_split_json(flat: pd.DataFrame, path: Path) -> None:
    """``flat.to_json(path, orient="split", index=False, double_precision=15, force_ascii=False)``,
    the same bytes, :data:`JSON_ROWS` rows at a time: pandas makes the whole text in memory first
    (at 10k fresh examples, a 25 MB file: 70 MB more at its peak, 0.56 s; this way 23-30 MB, 0.2 s)."""
    options = {"double_precision": 15, "force_ascii": False}
    head = flat.iloc[:0].to_json(orient="split", index=False, **options)  # {"columns":[...],"data":[]}
    with open(path, "w", encoding="utf-8") as out:
        out.write(head[:-len("]}")])
        for start in range(0, len(flat), JSON_ROWS):
            rows = flat.iloc[start:start + JSON_ROWS].to_json(orient="values", **options)
            out.write(("," if start else "") + rows[1:-1])
        out.write("]}")


def write_parquet(flat: pd.DataFrame, path: str | Path) -> None:
    """``flat`` (list and dict cells already JSON text) as Parquet. A text column that also holds
    numbers or booleans (a free-form column of the data) is written as text, JSON for each such
    cell: Parquet columns have one type."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        arrow = pa.Table.from_pandas(flat, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        flat = flat.copy()
        for column in flat.columns[flat.dtypes == object]:
            flat[column] = flat[column].map(lambda v: v if v is None or isinstance(v, str) else json.dumps(v, default=str))
        arrow = pa.Table.from_pandas(flat, preserve_index=False)
    encoded = flat.attrs.get(JSON_COLUMNS) or []
    arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), JSON_COLUMNS.encode(): json.dumps(encoded).encode()})
    pq.write_table(arrow, path)
    del arrow
    # what pyarrow's allocator kept of the copy (mimalloc holds freed pages for reuse: a streamed run
    # writing a part per chunk held ~60 MB more at its end)
    pa.default_memory_pool().release_unused()


def read_parquet(path: str | Path) -> pd.DataFrame:
    """A table :func:`write_parquet` wrote, as the same frame its MLflow table JSON gives
    (``pd.DataFrame(rows, columns)``: Python values, ``None`` for a null), so that a run logged
    before Parquet (JSON only) and one logged after read back alike."""
    import pyarrow.parquet as pq

    return _as_logged(pq.read_table(path))


def read_table(path: str | Path) -> pd.DataFrame:
    """A per-example table :func:`write_parquet` wrote, as :func:`ragmem.run.pipeline.build_table` made
    it: the JSON text cells decoded again (lists and dicts), the verdict and label columns
    nullable integers, a missing number NaN (a streamed run's ``EvaluationResult.table``)."""
    import pyarrow.parquet as pq

    arrow = pq.read_table(path)
    return _as_built(arrow.replace_schema_metadata(None), _encoded(arrow.schema))


class ParquetTable:
    """A per-example table on disk, read ``rows`` at a time (:meth:`chunks`): what a paired
    comparison (:mod:`ragmem.stats.paired_runs`) sums chunk by chunk without holding either run's table.
    ``built``: chunks as :func:`read_table` gives them, else as :func:`read_parquet`; ``keep``:
    what must live as long as the file (the temporary folder it was downloaded to);
    ``attrs``: as a frame's (``attrs["run"]``, the MLflow run it was logged by)."""

    def __init__(self, path: str | Path, built: bool = True, keep: Any = None, attrs: dict | None = None):
        self.path, self.built, self.keep, self.attrs = Path(path), built, keep, dict(attrs or {})

    def __len__(self) -> int:
        import pyarrow.parquet as pq

        return pq.ParquetFile(self.path).metadata.num_rows

    def column_names(self) -> list[str]:
        """The table's columns, from the file's schema (nothing read)."""
        import pyarrow.parquet as pq

        return list(pq.read_schema(self.path).names)

    def __contains__(self, column: object) -> bool:
        return column in self.column_names()

    def values(self, column: str) -> list:
        """One column's values, in file order (the column alone is read)."""
        import pyarrow.parquet as pq

        return pq.read_table(self.path, columns=[column]).column(0).to_pylist()

    def ids(self) -> list:
        """The ``id`` column alone."""
        import pyarrow.parquet as pq

        return pq.read_table(self.path, columns=["id"]).column(0).to_pylist()

    def chunks(self, rows: int):
        """The table ``rows`` at a time, in file order."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        source = pq.ParquetFile(self.path)
        encoded = _encoded(source.schema_arrow)
        for batch in source.iter_batches(batch_size=rows):
            arrow = pa.Table.from_batches([batch]).replace_schema_metadata(None)
            chunk = _as_built(arrow, encoded) if self.built else _as_logged(arrow)
            chunk.attrs.update(self.attrs)
            yield chunk

    def frame(self) -> pd.DataFrame:
        """The whole table at once (what needs every row together: a report's pages, a judge sweep's tau)."""
        table = read_table(self.path) if self.built else read_parquet(self.path)
        table.attrs.update(self.attrs)
        return table


def _encoded(schema) -> list[str]:
    return json.loads((schema.metadata or {}).get(JSON_COLUMNS.encode(), b"[]"))


def _as_logged(arrow) -> pd.DataFrame:
    return pd.DataFrame({name: arrow.column(name).to_pylist() for name in arrow.column_names},
                        columns=arrow.column_names)


def _as_built(arrow, encoded: list[str]) -> pd.DataFrame:
    table = arrow.to_pandas()
    for column in encoded:
        table[column] = [orjson.loads(v) if isinstance(v, str) else v for v in table[column].tolist()]
    for column in ("label", "verdict", "keyword_verdict", "judge_yes", "judge_votes"):
        if column in table:
            table[column] = table[column].astype("Int64")
    for column in table.columns:  # free text that may be missing, and what was never set: objects
        if table[column].dtype == object or column in ("error", "judge_error", "judge_reason") or \
                (isinstance(table[column].dtype, pd.StringDtype) and table[column].isna().all()):
            table[column] = table[column].astype(object).where(table[column].notna(), None)
    return table


def plot_files(metrics: dict[str, Any], latency_s: pd.Series, folder: str | Path) -> list[str]:
    """The run's plots as PNG files in ``folder``: the confusion matrix (when the data has labels)
    and the latency histogram (when latency was measured)."""
    figures = {}
    if metrics.get("confusion_tp") is not None or latency_s.notna().any():
        from ragmem.tracking import plots  # matplotlib: imported only where a plot is drawn

        if metrics.get("confusion_tp") is not None:
            figures["confusion_matrix.png"] = plots.confusion_matrix_figure(metrics)
        if latency_s.notna().any():
            figures["latency_histogram.png"] = plots.latency_histogram_figure(latency_s.to_frame("latency_s"))
    paths = []
    for name, figure in figures.items():
        path = Path(folder) / name
        figure.savefig(path)
        paths.append(str(path))
    return paths
