"""A conversation's metrics: what a turn keeps of the turns before it.

They are computed on the examples that are turns of a conversation: those that hold their earlier
turns (``history``, ``[{role, content}, ...]``: given in a record, or built from a session's traces by
:mod:`ragmem.data.conversations`). An example without is null for them, counted as ``no earlier turns
(history)`` (:mod:`ragmem.metrics.needs`), never 0. The user's earlier turns are ``U``; ``K`` the
keyword sets (:class:`ragmem.text.keywords.KeywordExtractor`), ``t`` = ``ranking.keyword_threshold``.

- ``knowledge_retention`` (as DeepEval's knowledge retention, per turn): 1 when the answer retains
  what the user stated earlier (uses it where the question needs it, does not contradict it, does
  not ask for it again), else 0; the mean over the turns with a user turn before them. With
  ``judge.type: llm`` the judge decides from the conversation, the question and the answer (one
  verdict request per turn; its reason in ``knowledge_retention_reason``). Offline it catches two of
  the three failures, not a contradiction: *asked again*, a question in the answer more than ``t`` of
  whose keywords are in ``K(U)``; *not used*, the reference answer draws on an earlier user turn
  (its keywords in ``K(U)`` but not in the question's) and the answer holds at most ``t`` of them.
- ``earlier_turn_recall``: of the earlier user turns the question needed, the share the memory
  recalled. A turn is needed when it holds what answers the question (the judge's
  ``context_relevance`` verdict on it; offline: it holds more than ``t`` of ``K(question)``, or a
  keyword of the reference answer that the question lacks). It is recalled when a context from
  memory (source ``memory_short`` or ``memory_long``; every context when none of the example's says
  where it came from) has the turn's id (``id``, else ``turn-<its index in history>``, as the
  reference agent's short-term memory names them) or holds more than ``t`` of its keywords.
  ``|needed ∩ recalled| / |needed|``; a turn that needed none is undefined (``zero_division``).

Both are means over turns; the session is the unit the intervals resample when ``stats.cluster_by``
is ``session_id`` (which traces that come in sessions get by themselves).

>>> from ragmem.metrics.conversation import asked_again
>>> asked_again("What is your name?", [{"name", "ann"}], lambda text: set(text.lower().strip("?").split()), 0.5)
False
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence

import pandas as pd

from ragmem.metrics import names, needs
from ragmem.metrics.base import failed, Family, mean_aggregator, MetricResult, nanmean, scored_mask, unless_note
from ragmem.metrics.ranking import keyword_relevant
from ragmem.prompts.templates import said_yes

NAMES = names.CONVERSATION.selectable
MEMORY_SOURCES = ("memory_short", "memory_long")
_QUESTIONS = re.compile(r"[^。！？!?.\n]*[?？]")


def user_turns(history: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(id, text)`` of each user turn of ``history``: its ``id``, else ``turn-<index in history>``."""
    return [(str(turn.get("id") or f"turn-{i}"), turn["content"]) for i, turn in enumerate(history)
            if turn.get("role", "user") == "user" and isinstance(turn.get("content"), str)]


def asked_again(answer: str, earlier: Sequence[set[str]], keywords: Callable[[str], set[str]],
                threshold: float) -> bool:
    """Whether a question in ``answer`` asks for what an earlier user turn (its keywords in
    ``earlier``) said: more than ``threshold`` of the question's keywords are in that turn's."""
    for question in _QUESTIONS.findall(answer):
        asked = keywords(question)
        if asked and any(len(asked & said) / len(asked) > threshold for said in earlier):
            return True
    return False


def _recalled(turn_id: str, turn_keywords: set[str], memories: list[dict], keywords, threshold: float) -> bool:
    return any(m.get("id") == turn_id or keyword_relevant(keywords, m["text"], turn_keywords, threshold)
               for m in memories)


def _memories(contexts: Sequence[dict]) -> list[dict]:
    """The contexts memory brought: those with a memory source, or all when none says where it came from."""
    if not any(c.get("source") for c in contexts):
        return list(contexts)
    return [c for c in contexts if c.get("source") in MEMORY_SOURCES]


class _Turns:
    """The rows the metrics are computed on, and what each one's computation asks the judge."""

    def __init__(self, table: pd.DataFrame, ctx):
        self.ctx, self.K, self.t = ctx, ctx.keywords, ctx.keyword_threshold
        self.rows = [None if failed(row) or needs.lacks(row, "knowledge_retention") else row for row in ctx.rows(table)]
        self.turns = [None if row is None else user_turns(row.history) or None for row in self.rows]

    def _each(self, score) -> tuple[list[float | None], list[Any], list[str | None], int]:
        """``score(row, turns) -> (value, extra, error)`` over the turns with earlier user turns (a
        value of ``None`` with no error: undefined, ``zero_division``); per row its value, its extra
        column, the judge's error, and the number of undefined rows (a turn with no user turn before
        it among them). A row it is not computed on (a failed call, no history) is null."""
        values, extras, errors, undefined = [], [], [], 0
        for row, turns in zip(self.rows, self.turns):
            value, extra, error = (None, None, None) if row is None or not turns else score(row, turns)
            if row is not None and value is None and error is None:
                undefined += 1
                value = self.ctx.zero_division
            values.append(value)
            extras.append(extra)
            errors.append(error)
        return values, extras, errors, undefined

    def retention(self) -> tuple[list[float | None], list[str | None], list[str | None], int]:
        """``knowledge_retention`` per row, its reason, the judge's error, and the undefined rows."""
        if self.ctx.llm is None:
            return self._each(lambda row, turns: (*self._offline_retention(row, turns), None))
        replies = iter(self.ctx.llm.run([("knowledge_retention", {
            "conversation": _shown(row.history), "question": row.query, "answer": row.generated_answer or ""})
            for row, turns in zip(self.rows, self.turns) if turns and row is not None]))

        def judged(row, turns):
            reply = next(replies)
            if reply.error:
                return None, None, reply.error
            return float(said_yes(reply.value)), reply.value.get("reason"), None
        return self._each(judged)

    def _offline_retention(self, row, turns: list[tuple[str, str]]) -> tuple[float, str | None]:
        K, answer = self.K, row.generated_answer or ""
        said = [K(text) for _, text in turns]
        if asked_again(answer, said, K, self.t):
            return 0.0, "asked again for what the user said earlier"
        drawn = (K(needs.reference(row)) & set().union(*said)) - K(row.query)  # what the reference takes from earlier
        if drawn and len(drawn & K(answer)) / len(drawn) <= self.t:
            return 0.0, f"did not use what the user said earlier ({', '.join(sorted(drawn - K(answer))[:5])})"
        return 1.0, None

    def recall(self) -> tuple[list[float | None], list[int | None], list[str | None], int]:
        """``earlier_turn_recall`` per row, how many earlier turns it needed, the judge's error, and
        the undefined rows (none needed)."""
        K, t = self.K, self.t
        if self.ctx.llm is not None:
            replies = iter(self.ctx.llm.run([("context_relevance", {"question": row.query, "context": text})
                                             for row, turns in zip(self.rows, self.turns) if turns and row is not None
                                             for _, text in turns]))

        def needed_of(row, turns):
            if self.ctx.llm is not None:
                got = [next(replies) for _ in turns]
                error = next((r.error for r in got if r.error), None)
                if error:
                    return None, error
                return [turn for turn, r in zip(turns, got) if said_yes(r.value)], None
            query, reference = K(row.query), K(needs.reference(row))
            return [(tid, text) for tid, text in turns
                    if keyword_relevant(K, text, query, t) or (reference & K(text)) - query], None

        def scored(row, turns):
            needed, error = needed_of(row, turns)
            if error:
                return None, None, error
            memories = _memories(list(row.contexts))
            hits = sum(_recalled(tid, K(text), memories, K, t) for tid, text in needed)
            return (hits / len(needed) if needed else None), len(needed), None
        return self._each(scored)


def _shown(history: Sequence[dict[str, Any]]) -> str:
    return "\n".join(f"{turn.get('role', 'user')}: {turn['content']}" for turn in history
                     if isinstance(turn.get("content"), str))


def compute(table: pd.DataFrame, ctx, wanted) -> MetricResult:
    """The wanted conversation metrics per turn (columns), their means and failure counts."""
    turns = _Turns(table, ctx)
    result = MetricResult(values={})
    if "knowledge_retention" in wanted:
        values, reasons, errors, undefined = turns.retention()
        _keep(result, "knowledge_retention", values, errors, undefined)
        result.columns["knowledge_retention_reason"] = reasons
    if "earlier_turn_recall" in wanted:
        values, counts, errors, undefined = turns.recall()
        _keep(result, "earlier_turn_recall", values, errors, undefined)
        result.columns["earlier_turns_needed"] = counts
    if not any(turns.turns):
        result.notes.append(unless_note(f"{', '.join(n for n in NAMES if n in wanted)}: no example is a turn with "
                                        f"earlier user turns (a record's history; traces: their session's earlier "
                                        f"traces)", *NAMES))
    return result


def _keep(result: MetricResult, name: str, values: list, errors: list, undefined: int) -> None:
    result.values[name] = nanmean(values)
    result.values[f"{name}_failures"] = float(sum(e is not None for e in errors))
    result.columns[name] = [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values]
    result.columns[f"{name}_error"] = errors
    result.undefined[name] = undefined


def aggregators(table: pd.DataFrame, names, zero_division: float, scorer=None) -> dict:
    ok = scored_mask(table)
    return {n: mean_aggregator(table[n], ok) for n in names if n in table}


FAMILY = Family(names.CONVERSATION, compute, aggregators, context_keywords=True)
