"""Conversations from traces: each turn of a session given the turns before it (its ``history``),
which the conversation metrics read (:mod:`ragmem.metrics.conversation`).

A trace whose root span sent its earlier messages keeps them (:func:`ragmem.data.spans.find_history`);
otherwise its history is the earlier traces of its session in the same window, in start order: each
one's query (the user's turn) and answer (the assistant's), the last ``data.traces.history`` of them.
A record of a file is a turn when it holds ``history`` itself (as its agent receives it).

The sessions still open are held in memory, at most ``open_sessions`` of them: a session not seen for
that many others is closed (its earlier turns forgotten: a later turn of it starts afresh), and the
closings are counted (:attr:`Sessions.closed_early`), never silent.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any

__all__ = ["Sessions"]


class Sessions:
    """The last ``window`` turns of each open session, the ``open_sessions`` most recent ones.

    >>> s = Sessions(window=2)
    >>> [s.history({"session_id": "a", "query": q, "answer": q.upper()}).get("history") for q in ("x", "y")]
    [None, [{'role': 'user', 'content': 'x'}, {'role': 'assistant', 'content': 'X'}]]
    """

    def __init__(self, window: int = 10, open_sessions: int = 10_000):
        self.window = window
        self.open_sessions = open_sessions
        self._turns: OrderedDict[str, deque] = OrderedDict()
        self.closed_early = 0      # sessions closed to make room (a later turn of one has lost its earlier ones)
        self.with_history = 0      # records given a history

    def history(self, record: dict[str, Any]) -> dict[str, Any]:
        """``record`` with its ``history`` (at most ``window`` turns: the root's own messages, else
        its session's earlier traces), and the session's turns advanced by this one."""
        session = record.get("session_id")
        if self.window == 0:
            record.pop("history", None)
            return record
        given = record.get("history")
        if given:
            record["history"] = given[-2 * self.window:]
        elif session is not None and self._turns.get(session):
            record["history"] = [turn for pair in self._turns[session] for turn in pair]
        self.with_history += bool(record.get("history"))
        if session is not None:
            self._advance(session, record)
        return record

    def _advance(self, session: str, record: dict[str, Any]) -> None:
        turns = self._turns.pop(session, None)
        if turns is None:
            turns = deque(maxlen=self.window)
        pair = [{"role": "user", "content": record["query"]}]
        if isinstance(record.get("answer"), str):
            pair.append({"role": "assistant", "content": record["answer"]})
        turns.append(pair)
        self._turns[session] = turns
        if len(self._turns) > self.open_sessions:
            self._turns.popitem(last=False)
            self.closed_early += 1
