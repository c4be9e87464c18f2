"""Scores that are the share of an answer's items a judge says yes to: ``faithfulness`` (the answer's
claims, each supported by the contexts or not: :mod:`ragmem.metrics.rag`) and ``answer_relevancy``'s
statements (each addressing the question or not: :mod:`ragmem.metrics.relevancy`). One request lists
an answer's items, one request judges an item; an answer with no item is undefined
(``zero_division``), a failed listing or verdict is that example's failure, never a 0."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ragmem.metrics.reliability import item_votes
from ragmem.prompts.templates import said_yes

Request = tuple[str, dict[str, str]]


def share_said_yes(ask: Callable[[list[Request]], list[Any]], rows: Sequence[Any], listing: Callable[[Any], Request],
                   key: str, judging: Callable[[Any], tuple[str, dict[str, str], str]], zero_division: float,
                   skip_blank: bool = False) -> tuple[list[float | None], list[str | None], int, list[Any]]:
    """Per row (``None``: not scored): ``listing(row)`` asks for its items (the reply's list ``key``),
    ``judging(row)`` gives the task, the fields and the field name each item is judged under; the share
    of its items judged yes. Returns the values, the failures' reasons, how many were undefined and the
    ``[yes, samples]`` votes per item (:func:`ragmem.metrics.reliability.item_votes`). ``skip_blank``:
    an item that is only white space is not judged."""
    listed = iter(ask([listing(row) for row in rows if row is not None]))
    plan: list[Any] = []
    requests: list[Request] = []
    for row in rows:
        said = None if row is None else next(listed)
        if said is None or said.error:
            plan.append(None if said is None else said.error)
            continue
        items = [s for s in said.value[key] if s.strip()] if skip_blank else said.value[key]
        task, fields, name = judging(row)
        plan.append((len(requests), len(items)))
        requests += [(task, {**fields, name: item}) for item in items]
    verdicts = ask(requests)
    values: list[float | None] = []
    errors: list[str | None] = []
    votes: list[Any] = []
    undefined = 0
    for item in plan:
        got = verdicts[item[0]:item[0] + item[1]] if isinstance(item, tuple) else []
        failed = [g.error for g in got if g.error]
        votes.append(None if failed or not got else item_votes(got, [int(said_yes(g.value)) for g in got]))
        value, error = None, None
        if item is None or isinstance(item, str):
            error = item
        elif not got:
            undefined += 1
            value = zero_division
        elif failed:
            error = failed[0]
        else:
            value = sum(said_yes(g.value) for g in got) / len(got)
        values.append(value)
        errors.append(error)
    return values, errors, undefined, votes
