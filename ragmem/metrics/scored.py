"""How many examples each score rests on: ``coverage`` in the summary JSON (metric -> ``{scored, of}``),
``n_scored/<metric>`` in MLflow, and the scores marked partial wherever they are shown.

A mean over 5 of 16 examples printed under "16 examples, 0 errors" reads as the score of 16. Each
metric with a per-example value counts the examples that value is defined on (``scored``) among
those it could have been computed for (``of``: every example; for accuracy, precision, recall and
f1 the labelled ones), and why the others were not scored: the agent call failed, the judge's reply
for that metric failed (its ``<metric>_error``), the judge's verdict failed, the example lacks a
field the metric needs (``no reference answer``, ``no contexts``: :mod:`ragmem.metrics.needs`), or the
value is undefined (0/0). Counts of chunks add up (:func:`merged`), so a streamed run's
coverage is its chunks' sum.
"""

from __future__ import annotations

import collections
import re
from typing import Any

import pandas as pd

from ragmem.metrics import catalogue, needs
from ragmem.metrics.names import CLASSIFICATION



def _column(name: str, table: pd.DataFrame) -> str | None:
    """The per-example column a metric is the mean of, or ``None`` (a count, a corpus-level figure
    without one, a metric of the judge's reliability)."""
    found = catalogue.facts(name)
    column = found.column if found is not None and found.column else name  # (avg_coverage's: coverage)
    if column not in table.columns and name.endswith("_pass_rate") and name[: -len("_pass_rate")] + "_error" in table.columns:
        column = name[: -len("_pass_rate")]  # an LLM metric's pass rate rests on the metric's own values
    if column not in table.columns or column in ("label", "id"):
        return None
    return column if pd.api.types.is_numeric_dtype(table[column]) else None


#: a number that belongs to one example (a claim's index, the tokens its reply ran to), not to the cause;
#: a setting's value (``judge.max_tokens 1024``) and a status (``HTTP 404``) are kept
_VARYING = re.compile(r"(?<![\w.])(?<!HTTP )(?<!max_tokens )\d+(?:\.\d+)?(?![\w.])")
#: the longest a cause is shown (cut at a space, never inside a word or a number)
CAUSE_CHARS = 160


def cause(reason: str) -> str:
    """What a failure's reason says of its cause, the same for every example it struck:
    ``claim 3: reply cut off at 84 tokens (judge.max_tokens 1024)`` -> ``claim …: reply cut off at …
    tokens (judge.max_tokens 1024)``; a long one cut at a space.

    >>> cause("claim 3: reply cut off at 84 tokens (judge.max_tokens 1024)")
    'claim …: reply cut off at … tokens (judge.max_tokens 1024)'
    """
    text = _VARYING.sub("…", " ".join(str(reason).split()))
    if len(text) > CAUSE_CHARS:
        text = text[:CAUSE_CHARS].rsplit(" ", 1)[0] + " …"
    return text


def _why(table: pd.DataFrame, column: str, missing: pd.Series) -> collections.Counter:
    """Why each of the ``missing`` rows has no value: the first cause that applies to it."""
    error_column = f"{column}_error" if f"{column}_error" in table.columns else (
        "judge_error" if column == "verdict" else None)
    agent = missing & (table["error"].notna() if "error" in table.columns else False)  # (a bare table: none)
    reply = missing & ~agent & (table[error_column].notna() if error_column is not None else False)
    reasons = collections.Counter(cause(r) for r in table.loc[reply, error_column].astype(str)) if reply.any() \
        else collections.Counter()
    if agent.any():
        reasons["agent call failed"] = int(agent.sum())
    rest = missing & ~agent & ~reply
    # an input the metric needs is not in the example (production traffic: no reference answer); a
    # verdict the judge was not asked for lacks the reference (the keyword judge needs one)
    for field in (needs.REFERENCE,) if column == "verdict" else needs.needs(column):
        lacking = rest & ~needs.holding(table, field) if rest.any() else rest
        if lacking.any():
            reasons[needs.WHY[field]] = int(lacking.sum())
            rest = rest & ~lacking
    undefined = int(rest.sum())
    if undefined:
        reasons["undefined (0/0 or an input missing)"] = undefined
    return reasons


def chunk_coverage(table: pd.DataFrame, names: list[str]) -> dict[str, dict[str, Any]]:
    """``{metric: {"scored": n, "of": m, "reasons": {reason: count}}}`` for the metrics of ``names``
    that rest on per-example values of ``table``."""
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        if name in CLASSIFICATION.selectable and {"verdict", "label"} <= set(table.columns):
            could = table["label"].notna()
            column = "verdict"
        else:
            found = _column(name, table)
            if found is None:
                continue
            column = found
            could = pd.Series(True, index=table.index)
        scored = table[column].notna() & could
        out[name] = {"scored": int(scored.sum()), "of": int(could.sum()),
                     "reasons": dict(_why(table, column, could & ~scored))}
    return out


def merged(first: dict[str, dict[str, Any]], second: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Two chunks' coverage added up."""
    out = {name: {"scored": c["scored"], "of": c["of"], "reasons": dict(c["reasons"])} for name, c in first.items()}
    for name, c in second.items():
        mine = out.setdefault(name, {"scored": 0, "of": 0, "reasons": {}})
        mine["scored"] += c["scored"]
        mine["of"] += c["of"]
        for reason, n in c["reasons"].items():
            mine["reasons"][reason] = mine["reasons"].get(reason, 0) + n
    return out


def failed_replies(metrics: dict[str, Any]) -> dict[str, int]:
    """The metrics whose judge replies failed, with how many (``<metric>_failures``; the endpoint's own
    ``judge_failures`` and ``embeddings_failures`` are its usage, not a metric's).

    >>> failed_replies({"faithfulness_failures": 11.0, "judge_failures": 11.0, "f1": 0.5, "answer_correctness_failures": 0})
    {'faithfulness': 11}
    """
    return {k[: -len("_failures")]: int(v) for k, v in metrics.items()
            if k.endswith("_failures") and v and not catalogue.is_total(k)}


def partial(coverage: dict[str, dict[str, Any]], min_share: float) -> dict[str, str]:
    """The metrics scored on less than ``min_share`` of the examples they could have been, each with
    its count and every cause with its count, the most frequent first (they add up to the examples
    missing): ``{"faithfulness": "6 of 16 (10: reply cut off at … tokens (judge.max_tokens 1024))"}``.

    >>> partial({"f": {"scored": 5, "of": 16, "reasons": {"cut off": 9, "agent call failed": 2}},
    ...          "g": {"scored": 9, "of": 9, "reasons": {}}}, 0.9)
    {'f': '5 of 16 (9: cut off; 2: agent call failed)'}
    """
    out = {}
    for name, c in coverage.items():
        if c["of"] and c["scored"] < min_share * c["of"]:
            out[name] = f"{c['scored']} of {c['of']} ({causes(c['reasons'])})"
    return out


def causes(reasons: dict[str, int], most: int = 4) -> str:
    """``10: reply cut off ...; 2: agent call failed`` (the ``most`` most frequent, then how many more)."""
    ranked = sorted(reasons.items(), key=lambda item: -item[1])
    shown = "; ".join(f"{n}: {reason}" for reason, n in ranked[:most]) or "not scored"
    rest = sum(n for _, n in ranked[most:])
    return shown + (f"; {rest}: {len(ranked) - most} other causes" if rest else "")
