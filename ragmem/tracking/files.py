"""The artifact files of a run written before they are logged: the per-example table (CSV and
MLflow's table JSON) and the plots. Plain functions of their inputs, with no MLflow call, so that
:func:`ragmem.tracking.record_run` makes them on the idle worker processes of the run's pool while
this process logs everything else (at 10k examples: 2.6 s of pandas writers, and matplotlib's
import with the drawing, 1.5 to 1.8 s, off the logging step's critical path);
:class:`ragmem.tracking.Tracker` then logs the files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd


def table_file(table: pd.DataFrame, folder: str | Path, name: str, kind: str) -> str:
    """``<name>.csv`` (``kind="csv"``, for spreadsheets) or ``<name>.json`` (``"json"``: MLflow's
    table format, ``{"columns", "data"}``, for the UI's Evaluation/Artifacts view and
    :func:`ragmem.compare.load_run_table`) in ``folder``; list and dict cells as JSON text. Floats
    with 15 significant digits in the JSON (pandas' most; ``MlflowClient.log_table`` keeps 10)."""
    return _write(_flat(table), folder, name, kind)


def table_files(table: pd.DataFrame, folder: str | Path, name: str) -> list[str]:
    """Both files of :func:`table_file`, from one flattened copy."""
    flat = _flat(table)
    return [_write(flat, folder, name, kind) for kind in ("csv", "json")]


def _flat(table: pd.DataFrame) -> pd.DataFrame:
    flat = table.copy()
    for column in flat.columns[flat.dtypes == object]:
        if any(isinstance(v, (list, dict)) for v in flat[column]):
            flat[column] = flat[column].map(lambda v: json.dumps(v, ensure_ascii=False))
    return flat


def _write(flat: pd.DataFrame, folder: str | Path, name: str, kind: str) -> str:
    path = Path(folder) / f"{name}.{kind}"
    if kind == "csv":
        flat.to_csv(path, index=False)
    else:
        flat.to_json(path, orient="split", index=False, double_precision=15, force_ascii=False)
    return str(path)


def plot_files(metrics: dict[str, Any], latency_s: pd.Series, folder: str | Path) -> list[str]:
    """The run's plots as PNG files in ``folder``: the confusion matrix (when the data has labels)
    and the latency histogram (when latency was measured)."""
    figures = {}
    if metrics.get("confusion_tp") is not None or latency_s.notna().any():
        from ragmem import plots  # matplotlib: imported only where a plot is drawn

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
