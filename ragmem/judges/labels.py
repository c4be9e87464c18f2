"""Human labels for the judge's verdicts: the sheet ragmem draws for a person to fill in
(``judge.label_sample: K``) and the filled sheet read back (``ragmem labels import RUN CSV``).

The sheet is a CSV with one row per example: ``example_id``, an empty ``label`` column to fill with
1 (the answer is correct) or 0, then what a person needs to decide (``query``, ``generated_answer``,
``reference_answer``) and the judge's own ``judge_verdict`` and ``judge_reason``. The K examples are
drawn, seeded, among the judged ones without a label, stratified by the judge's verdict: each verdict
gets its share of K (largest remainder, at least one where K allows), so the labels measure the
judge's errors in both directions.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ragmem.data.readers import check_encoding, not_utf8_message
from ragmem.errors import ConfigError
from ragmem.schema import LABEL_SET_ASIDE

SHEET = "labels_to_fill.csv"
COLUMNS = ("example_id", "label", "query", "generated_answer", "reference_answer", "judge_verdict", "judge_reason")
REQUIRED = ("example_id", "label")


def allocate(sizes: Sequence[int], k: int) -> list[int]:
    """How many of ``k`` draws each stratum of ``sizes`` gets: its proportional share, rounded by
    largest remainder, at least one per non-empty stratum while ``k`` allows, never more than it holds.

    >>> allocate([90, 10], 10)
    [9, 1]
    >>> allocate([99, 1], 10)
    [9, 1]
    >>> allocate([3, 2], 10)
    [3, 2]
    """
    total = sum(sizes)
    k = min(k, total)
    if k == 0:
        return [0] * len(sizes)
    shares = [k * s / total for s in sizes]
    counts = [int(x) for x in shares]
    for i in sorted(range(len(sizes)), key=lambda i: shares[i] - counts[i], reverse=True)[: k - sum(counts)]:
        counts[i] += 1
    for i, size in enumerate(sizes):  # a stratum that exists is never left out while another can give
        if size and not counts[i]:
            donor = max(range(len(sizes)), key=lambda j: counts[j])
            if counts[donor] > 1:
                counts[donor] -= 1
                counts[i] += 1
    return counts


def pick(table: pd.DataFrame, k: int, seed: int = 0) -> pd.DataFrame:
    """``k`` judged examples without a label, drawn (seeded) stratified by the judge's verdict, as
    the rows of the sheet (in the table's order)."""
    rows = pick_rows(table, k, seed)
    return pd.DataFrame({"example_id": rows["id"].astype(str), "label": "", "query": rows.get("query"),
                         "generated_answer": rows.get("generated_answer"), "reference_answer": rows.get("reference_answer"),
                         "judge_verdict": pd.to_numeric(rows["verdict"]).astype(int), "judge_reason": rows.get("judge_reason")},
                        columns=list(COLUMNS))


def pick_rows(table: pd.DataFrame, k: int, seed: int = 0) -> pd.DataFrame:
    """The table's rows :func:`pick` draws (a streamed run draws again from each chunk's)."""
    verdict = pd.to_numeric(table["verdict"], errors="coerce")
    label = pd.to_numeric(table["label"], errors="coerce") if "label" in table else verdict * np.nan
    ok = table["error"].isna() if "error" in table else pd.Series(True, index=table.index)
    candidates = table[ok & verdict.notna() & label.isna()]
    strata = [candidates.index[verdict[candidates.index] == v] for v in (1, 0)]
    rng = np.random.default_rng(seed)
    chosen = [idx for stratum, n in zip(strata, allocate([len(s) for s in strata], k))
              for idx in rng.choice(stratum, size=n, replace=False)]
    return table.loc[sorted(chosen, key=table.index.get_loc)]


def write_sheet(rows: pd.DataFrame, path: str | Path) -> Path:
    """The sheet as CSV (UTF-8 with a byte-order mark, so that spreadsheets read Chinese right)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(path, index=False, encoding="utf-8-sig")
    return path


def label_sheet(table: pd.DataFrame, k: int | None, seed: int, folder: Path, run_id: str | None) -> list[str]:
    """``judge.label_sample: K``: K judged examples without a label, stratified by verdict, to
    ``labels_to_fill.csv`` in the run ``folder`` (logged to MLflow with the run); the notes that say
    what was written and what to do next."""
    if not k:
        return []
    rows = pick(table, k, seed)
    notes = [] if len(rows) >= k else [f"judge.label_sample {k}: only {len(rows)} judged examples without a label to draw from"]
    if rows.empty:
        return notes
    path = write_sheet(rows, Path(folder) / SHEET)
    then = f"ragmem labels import {run_id[:8]} {path}" if run_id else "(an untracked run: nothing to import into)"
    return notes + [f"labels: {len(rows)} examples to label in {path} (fill the label column with 1 or 0), then: {then}"]


def read_sheet(path: str | Path, known: set[str], run: str,
               answers: dict[str, str] | None = None, encoding: str = "utf-8-sig") -> tuple[dict[str, int], int]:
    """The labels of a filled sheet: ``{example_id: 0 or 1}`` and the number of rows left blank;
    ``answers``, when given, is filled with the ``generated_answer`` each labelled row shows (the
    answer its label judged: :func:`attach` binds the label to it).
    Any problem is a :class:`ConfigError` of one line naming the file, the row and the field; nothing
    is attached when one row is wrong. ``known``: the example ids of run ``run``; ``encoding``: the
    sheet's (``labels import --encoding``: a sheet Excel saved in Chinese is often GBK)."""
    path = Path(path)
    try:
        with open(path, encoding=check_encoding(encoding), newline="") as handle:
            reader = csv.DictReader(handle)
            header = [h.strip() for h in reader.fieldnames or []]
            missing = [c for c in REQUIRED if c not in header]
            if missing:
                raise ConfigError(f"{path}: missing column {missing[0]!r} (a label sheet needs the columns "
                                  f"{' and '.join(REQUIRED)}; found: {', '.join(header) or 'none'})")
            rows = [{(k or "").strip(): (v or "").strip() if isinstance(v, str) else v for k, v in row.items()}
                    for row in reader]
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except ValueError as exc:
        if not isinstance(exc, UnicodeDecodeError):  # (an unknown --encoding)
            raise ConfigError(f"--encoding: {exc}") from None
        how = ("give --encoding gb18030", "--encoding")
        raise ConfigError(f"{path}: {not_utf8_message(path, exc, encoding, how)}") from None
    except csv.Error as exc:
        raise ConfigError(f"{path}: not a readable CSV file ({exc})") from None
    labels: dict[str, int] = {}
    blank = 0
    for number, row in enumerate(rows, start=2):  # row 1 is the header, as a spreadsheet numbers them
        example, value = row.get("example_id") or "", row.get("label") or ""
        if not example:
            raise ConfigError(f"{path}: row {number}, field example_id: empty")
        if example not in known:
            raise ConfigError(f"{path}: row {number}, field example_id: {example!r} is not an example of run {run}")
        if value == "":
            blank += 1
            continue
        if value not in ("0", "1", "0.0", "1.0"):
            raise ConfigError(f"{path}: row {number} (example {example}), field label: expected 0 or 1, got {value!r}")
        verdict = int(float(value))
        if labels.get(example, verdict) != verdict:
            raise ConfigError(f"{path}: row {number} (example {example}), field label: {verdict} contradicts "
                              f"{labels[example]} on an earlier row")
        labels[example] = verdict
        if answers is not None and "generated_answer" in header:
            answers[example] = row.get("generated_answer") or ""
    if not labels:
        raise ConfigError(f"{path}: no row has a label (fill the label column with 1 or 0)")
    return labels, blank


def _words(text) -> str:
    """An answer as a sheet keeps it: its words (a spreadsheet may change line ends and spaces)."""
    return "" if text is None or (isinstance(text, float) and np.isnan(text)) else " ".join(str(text).split())


def attach(table: pd.DataFrame, labels: dict[str, int], answers: dict[str, str] | None = None) -> pd.DataFrame:
    """A copy of the run's table with ``labels`` in its ``label`` column (by example id). A label
    whose row showed another answer than the run's (``answers``, from :func:`read_sheet`; compared
    word by word) judged that other answer: it is set aside (``label_set_aside``), never compared
    with this run's verdict."""
    out = table.copy()
    ids = out["id"].astype(str)
    run_answers = dict(zip(ids, out["generated_answer"])) if "generated_answer" in out else {}
    other = {i for i, text in (answers or {}).items() if i in labels and _words(text) != _words(run_answers.get(i))}
    kept = {i: v for i, v in labels.items() if i not in other}
    current = pd.to_numeric(out["label"], errors="coerce") if "label" in out else pd.Series(np.nan, index=out.index)
    out["label"] = ids.map(kept).astype(float).where(ids.isin(kept), current.where(~ids.isin(other))).astype("Int64")
    if other:
        before = (pd.to_numeric(out[LABEL_SET_ASIDE], errors="coerce") if LABEL_SET_ASIDE in out
                  else pd.Series(np.nan, index=out.index))
        aside = {i: labels[i] for i in other}
        out[LABEL_SET_ASIDE] = ids.map(aside).astype(float).where(ids.isin(aside), before).astype("Int64")
    return out
