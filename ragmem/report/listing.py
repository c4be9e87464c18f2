"""The table of runs ``ragmem compare`` lists (an experiment's latest runs, a sweep's children),
fitted to the width it is shown in."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Sequence

import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table

from ragmem.report import terminal

__all__ = ["print_runs", "listing_width"]


def print_runs(table, title: str, warnings: list[str], notes: Sequence[str] = ()) -> None:
    """The latest runs of an experiment (or a sweep's children): the settings that differ and the
    metrics, fitted to the width (a terminal's, ``COLUMNS``; a pipe's: the table's own, never folded):
    the columns that do not fit are left out from the right, settings first, and said so."""

    def view_of(columns: list[str]) -> Table:
        view = Table(title=title, title_justify="left", box=box.SIMPLE_HEAVY, pad_edge=False, collapse_padding=True)
        for column in columns:
            header = "run" if column == "run_id" else terminal.short(terminal.label(column.rsplit(".", 1)[-1]))
            terminal._column(view, header, numeric=pd.api.types.is_float_dtype(table[column]), overflow="fold")
        for _, row in table[columns].iterrows():
            view.add_row(*[(str(v)[:8] if c == "run_id" else terminal.fmt(c, None if pd.isna(v) else v)
                            if isinstance(v, float) else terminal._setting("" if v is None else v))
                           for c, v in row.items()])
        return view

    width = listing_width()
    columns = list(table.columns)
    view = view_of(columns)
    measure = Console(width=10_000).measure  # (a console wide enough that nothing folds: the table's own width)
    need = measure(view).maximum
    keep = 3 if "decision" not in columns else 4  # the run, its decision, a setting or the sort metric
    while width is not None and need > width and len(columns) > keep:
        columns.remove(_least_needed(table, columns))
        view = view_of(columns)
        need = measure(view).maximum
    out = terminal.out  # (the console the tests record)
    saved = out.width
    out.width = max(need, 40) if width is None else width
    try:
        out.print(view)
    finally:
        out.width = saved
    left = [c for c in table.columns if c not in columns]
    if left:
        shown = ", ".join(left[:4]) + (", ..." if len(left) > 4 else "")
        terminal.say(f"{terminal.plural(len(left), 'column')} left out to fit {width} characters ({shown}): "
                     f"a wider terminal, or --output FILE, has them all")
    legend = terminal.legend(columns)
    if legend:
        terminal.say(legend)
    for note in notes:
        terminal.say(f"note: {note}")
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)


def _least_needed(table, columns: list[str]) -> str:
    """The column to leave out first. A sweep's children (a ``decision`` column): the metrics after the
    objective, from the right (its grid's settings are what the ranking is about); then, as for any
    listing, the setting with most values (the wider of two such), else the rightmost column."""
    if "decision" in columns:
        metrics = [c for c in columns if "." not in c and c not in ("run_id", "decision", "status")]
        if len(metrics) > 1:
            return metrics[-1]
    settings = [c for c in columns if "." in c]
    if len(settings) > 1:
        return max(settings, key=lambda c: (table[c].nunique(), table[c].astype(str).str.len().max()))
    return columns[-1]


def listing_width() -> int | None:
    """The width a listing fits: the terminal's (or ``COLUMNS``), else none (a pipe: never folded)."""
    if os.environ.get("COLUMNS", "").isdigit():
        return max(40, int(os.environ["COLUMNS"]))
    if sys.stdout.isatty():
        return max(40, shutil.get_terminal_size((120, 24)).columns)
    return None
