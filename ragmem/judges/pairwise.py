"""Pairwise judging of two runs: ``ragmem compare RUN_A RUN_B --judge pairwise [--rubric NAME]``.

For every example the two runs share (matched by id) that both answered, the LLM judge sees the two
answers twice, once in each order (A as answer 1, then B as answer 1). Position bias is measured, not
assumed away: a verdict that changes with the order (A first, then B first; or a winner one way and a
tie the other) counts as a tie and as ``swap_inconsistent``. Per example B's outcome against A is
1 (won), 0.5 (tie) or 0 (lost)::

    win_rate           = mean outcome over the judged examples   (ties count half)
    swap_inconsistency = share of the examples sent to the judge whose verdict changed with the order

with a seeded percentile bootstrap interval of the win rate over examples. Two answers that are the
same text (whitespace aside) are a tie without a request (``identical``, counted in
``n_identical``): nothing tells them apart, and a judge would be paid to guess. They are no part of
the swap inconsistency, which measures the judge (its denominator is the examples the judge was asked
about, ``n_asked``): a judge that always picks the first position is 1.0 whatever share of the answers
were identical. An example with a failed
request (after retries and one repair) is not judged: counted in ``n_failed`` with its reason. The
default criterion is which answer better answers the question given the reference; ``--rubric NAME``
takes the criteria (and steps) of the config's rubric. Replies are cached like every judge request,
as each arrives: a rerun sends nothing, and after Ctrl+C (or an endpoint that stopped answering)
the same command asks only the rest (the line it ends with says how many were kept). Progress and
ETA are the judge stage's (:mod:`ragmem.runtime.progress`).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ragmem.clients.endpoints import EndpointDown
from ragmem.clients.replies import kept
from ragmem.errors import RagmemError
from ragmem.prompts import templates as prompts

DEFAULT_CRITERION = "Which answer better answers the question, given the reference answer?"
PAIRWISE_VERSION = "pairwise-2026-12-02.1"


def criterion_of(rubric: Any | None) -> str:
    """The question the judge answers: the default, or a rubric's criteria and steps."""
    if rubric is None:
        return DEFAULT_CRITERION
    steps = " ".join(f"({i}) {s}" for i, s in enumerate(rubric.steps, 1))
    return f"Which answer better meets these criteria: {rubric.criteria}" + (f" Steps: {steps}" if steps else "")


@dataclass(frozen=True)
class Pair:
    """One shared example: its question, reference and the two runs' answers."""

    id: str
    query: str
    reference: str
    answer_a: str
    answer_b: str


def shared_pairs(a: pd.DataFrame, b: pd.DataFrame) -> tuple[list[Pair], int]:
    """The examples both runs answered (matched by id, in A's order), and how many ids they share
    (an example one run failed to answer is shared but not judged)."""
    answered_b = {row.id: row for row in b.itertuples(index=False)}
    shared, pairs = 0, []
    for row in a.itertuples(index=False):
        other = answered_b.get(row.id)
        if other is None:
            continue
        shared += 1
        if _answered(row) and _answered(other):
            pairs.append(Pair(str(row.id), row.query or "", row.reference_answer or "", row.generated_answer,
                              other.generated_answer))
    return pairs, shared


def _answered(row) -> bool:
    return not isinstance(getattr(row, "error", None), str) and isinstance(row.generated_answer, str)


def _winner(value: dict[str, Any]) -> str:
    return str(value["winner"]).strip().lower()


def verdict(first: dict[str, Any], second: dict[str, Any]) -> tuple[str, bool]:
    """B's outcome from the reply with A as answer 1 (``first``) and with B as answer 1 (``second``):
    ``("win" | "tie" | "loss", swap_inconsistent)``.

    >>> verdict({"winner": "2"}, {"winner": "1"})    # B both times
    ('win', False)
    >>> verdict({"winner": "1"}, {"winner": "1"})    # the first position both times
    ('tie', True)
    >>> verdict({"winner": "tie"}, {"winner": "tie"})
    ('tie', False)
    """
    one = {"1": "a", "2": "b", "tie": "tie"}[_winner(first)]
    two = {"1": "b", "2": "a", "tie": "tie"}[_winner(second)]
    if one != two:
        return "tie", True
    return {"a": "loss", "b": "win", "tie": "tie"}[one], False


_POINTS = {"win": 1.0, "tie": 0.5, "loss": 0.0}


def bootstrap_interval(points: Sequence[float], resamples: int, seed: int, confidence: float) -> list[float] | None:
    """Percentile bootstrap interval of the mean of ``points`` (examples resampled with replacement)."""
    values = np.asarray(points, dtype=float)
    if values.size == 0 or resamples < 1:
        return None
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(resamples, values.size))].mean(axis=1)
    tail = (1 - confidence) / 2
    return [float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))]


def judge_pairs(client: Any, pairs: Sequence[Pair], criterion: str) -> list[dict[str, Any]]:
    """Ask ``client`` (a :class:`ragmem.clients.llm_client.JudgeClient`) about every pair in both orders: one row per
    pair with its outcome, whether it was swap-inconsistent, both verdicts and reasons (or the error)."""
    requests = []
    asked = [pair for pair in pairs if not identical(pair)]
    for pair in asked:
        for first, second in ((pair.answer_a, pair.answer_b), (pair.answer_b, pair.answer_a)):
            requests.append(("pairwise", {"question": pair.query, "reference": pair.reference, "answer_1": first,
                                          "answer_2": second, "criterion": criterion}))
    try:
        replies = iter(client.run(requests) if requests else [])
    except (KeyboardInterrupt, EndpointDown) as stopped:  # what was answered is in the cache: said, and how to go on
        stopped.ragmem_progress = ("", kept(client, requests), len(requests),  # type: ignore[union-attr]
                                   "pairwise requests answered" + (" and kept in the judge cache" if client.cache is not None
                                                                   else " (judge.cache is off: none kept)"))
        raise
    rows = []
    for pair in pairs:
        row: dict[str, Any] = {"id": pair.id, "query": pair.query, "reference_answer": pair.reference,
                               "answer_a": pair.answer_a, "answer_b": pair.answer_b, "identical": identical(pair)}
        if row["identical"]:
            row.update(outcome="tie", swap_inconsistent=False, error=None)
            rows.append(row)
            continue
        ab, ba = next(replies), next(replies)
        if ab.error or ba.error:
            row.update(outcome=None, swap_inconsistent=None, error=ab.error or ba.error)
        else:
            outcome, flipped = verdict(ab.value, ba.value)
            row.update(outcome=outcome, swap_inconsistent=flipped, error=None,
                       verdict_a_first=_winner(ab.value), reason_a_first=ab.value.get("reason"),
                       verdict_b_first=_winner(ba.value), reason_b_first=ba.value.get("reason"))
        rows.append(row)
    return rows


def identical(pair: Pair) -> bool:
    """Whether the two answers are the same text, whitespace aside (a tie without a request).

    >>> identical(Pair("1", "q", "r", "Paris.\\n", " Paris."))
    True
    """
    return " ".join(pair.answer_a.split()) == " ".join(pair.answer_b.split())


def summarise(rows: Sequence[dict[str, Any]], n_shared: int, resamples: int = 1000, seed: int = 0,
              confidence: float = 0.95) -> dict[str, Any]:
    """Wins, ties and losses of B against A, B's win rate with its interval, the swap inconsistency
    (module doc). Null (never 0) when no example could be judged."""
    judged = [r for r in rows if r["outcome"] is not None]
    asked = [r for r in judged if not r.get("identical")]  # (what the judge saw: the swap's denominator)
    counts = collections.Counter(r["outcome"] for r in judged)
    points = [_POINTS[r["outcome"]] for r in judged]
    failures = collections.Counter(r["error"] for r in rows if r["outcome"] is None)
    return {
        "n_shared": n_shared, "n_pairs": len(rows), "n_judged": len(judged), "n_failed": len(rows) - len(judged),
        "n_unanswered": n_shared - len(rows),
        "wins": counts["win"], "ties": counts["tie"], "losses": counts["loss"],
        "win_rate": float(np.mean(points)) if points else None,
        "win_rate_ci": bootstrap_interval(points, resamples, seed, confidence),
        "swap_inconsistency": (sum(r["swap_inconsistent"] for r in asked) / len(asked)) if asked else None,
        "n_swap_inconsistent": sum(r["swap_inconsistent"] for r in asked), "n_asked": len(asked),
        "n_identical": sum(bool(r.get("identical")) for r in judged),
        "failure_reasons": dict(failures.most_common()),
        "resamples": resamples, "seed": seed, "confidence": confidence,
    }


def compare_pairwise(a: pd.DataFrame, b: pd.DataFrame, client: Any, rubric: Any | None = None,
                     resamples: int = 1000, seed: int = 0, confidence: float = 0.95) -> dict[str, Any]:
    """Pairwise comparison of two per-example tables (:func:`ragmem.tracking.runs.load_run_table`): the
    summary, the judge's usage and the per-example rows (``rows``)."""
    pairs, n_shared = pairs_to_judge(a, b)
    criterion = criterion_of(rubric)
    rows = judge_pairs(client, pairs, criterion)
    result = {"run_a": a.attrs["run"].info.run_id, "run_b": b.attrs["run"].info.run_id, "judge": "pairwise",
              "criterion": criterion, "rubric": getattr(rubric, "name", None),
              "judge_signature": f"{client.signature()}|{PAIRWISE_VERSION}#{prompts.prompt_hash()}",
              **summarise(rows, n_shared, resamples, seed, confidence),
              "usage": client.usage.as_metrics("judge"), "cached_replies": getattr(client, "cache", None) is not None,
              "rows": rows}
    return result


def pairs_to_judge(a: pd.DataFrame, b: pd.DataFrame) -> tuple[list[Pair], int]:
    """:func:`shared_pairs`, or a RagmemError when there is nothing to judge (no shared id, or no
    shared example answered by both runs): said before any request."""
    pairs, n_shared = shared_pairs(a, b)
    if not n_shared:
        raise RagmemError(f"compare --judge pairwise: runs {a.attrs['run'].info.run_id} and "
                          f"{b.attrs['run'].info.run_id} share no example ids: nothing to judge")
    if not pairs:
        raise RagmemError(f"compare --judge pairwise: of the {n_shared} examples the runs share, none was "
                          "answered by both: nothing to judge")
    return pairs, n_shared
