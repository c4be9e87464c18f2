"""LongMemEval (Wu et al., ICLR 2025): 500 questions, each with its own timestamped chat history.

Reads the published JSON files as they are (``longmemeval_oracle.json``, ``longmemeval_s*.json``,
``longmemeval_m*.json``; ragmem does not download them): a list of questions, each::

    {question_id, question_type, question, answer, question_date,
     haystack_session_ids: [...], haystack_dates: [...],
     haystack_sessions: [[{role, content, has_answer?}, ...], ...], answer_session_ids: [...]}

Each question becomes a :class:`ragmem.memory.locomo.Conversation` of its own (its id the question's):
its haystack sessions in the file's order with their dates, turn ids ``session_id:turn_index``
(1-based, as LoCoMo's ``D1:3``), and one question asked at ``question_date``. The evidence is the
``has_answer`` turns (turn-level recall) and ``answer_session_ids`` (session-level recall).

Question types are numbered in :data:`CATEGORIES` (one table with its source, logged with every
run); a question whose id ends in ``_abs`` is an abstention question whatever its type (the
information is not in the history; ``answer`` explains why): scored as abstention in a row of its
own (:data:`ABSTENTION`), never in the overall score. The judge's task per type (:data:`TASKS`)
carries the benchmark's published rules (its ``evaluate_qa.py``), in prompts written for ragmem
(:mod:`ragmem.prompts.templates`); offline, :func:`offline_verdict`.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from ragmem.data.readers import check_path, read_json
from ragmem.errors import DataError
from ragmem.memory.locomo import Conversation, QA, Session, Turn

#: question types as numbered here (the per-type rows and the ``_cat{N}`` metrics), abstention apart
CATEGORIES = {1: "single-session-user", 2: "single-session-assistant", 3: "single-session-preference",
              4: "multi-session", 5: "knowledge-update", 6: "temporal-reasoning", 7: "abstention"}
ABSTENTION = 7
PREFERENCE = 3  # its reference is a rubric of the wanted response: judged, never overlapped
TEMPORAL = 6
CATEGORY_SOURCE = ("xiaowu0162/LongMemEval README (question_type; a question_id ending in _abs is an abstention "
                   "question) and src/evaluation/evaluate_qa.py (get_anscheck_prompt: one rule per type; temporal "
                   "tolerates an off-by-one in days, knowledge-update passes on the updated value, preference is "
                   "judged against a rubric, abstention passes when the question is identified as unanswerable)")
_TYPES = {name: code for code, name in CATEGORIES.items() if code != ABSTENTION}
#: the LLM judge's task (:data:`ragmem.prompts.templates.TASKS`) per category
TASKS = {1: "longmemeval_answer", 2: "longmemeval_answer", 4: "longmemeval_answer", 3: "longmemeval_preference",
         5: "longmemeval_update", 6: "longmemeval_temporal", 7: "longmemeval_abstention"}
_COUNT = re.compile(r"(\d+)\s*(day|week|month|year|hour|minute)s?\b", re.IGNORECASE)
_FIELDS = ("question_id", "question_type", "question", "answer", "haystack_session_ids", "haystack_dates",
           "haystack_sessions", "answer_session_ids")


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _question(item: Any, n: int, file: str) -> Conversation:
    if not isinstance(item, dict):
        raise DataError(file, f"question {n}: expected an object, got {type(item).__name__}")
    qid = item.get("question_id")
    where = f"question {qid if isinstance(qid, str) and qid else n}: "
    missing = [f for f in _FIELDS if f not in item]
    if missing:
        raise DataError(file, where + f"field '{missing[0]}': missing (the LongMemEval format has {', '.join(_FIELDS)})")
    if not isinstance(qid, str) or not qid.strip():
        raise DataError(file, where + "field 'question_id': expected a non-empty string")
    kind = item["question_type"]
    if kind not in _TYPES:
        raise DataError(file, where + f"field 'question_type': expected one of {', '.join(_TYPES)}, got {kind!r}")
    if not isinstance(item["question"], str) or not item["question"].strip():
        raise DataError(file, where + "field 'question': expected a non-empty string")
    if not isinstance(item["answer"], (str, int, float)) or isinstance(item["answer"], bool):
        raise DataError(file, where + f"field 'answer': expected a string or a number, got {type(item['answer']).__name__}")
    ids, dates, sessions = item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"]
    for name, value in (("haystack_session_ids", ids), ("haystack_dates", dates), ("answer_session_ids", item["answer_session_ids"])):
        if not _strings(value):
            raise DataError(file, where + f"field '{name}': expected a list of strings")
    if not isinstance(sessions, list) or len(sessions) != len(ids) or len(dates) != len(ids):
        raise DataError(file, where + "field 'haystack_sessions': expected one list of turns per haystack_session_ids "
                                      f"entry ({len(ids)}), with as many haystack_dates (got {len(sessions) if isinstance(sessions, list) else type(sessions).__name__} "
                                      f"and {len(dates)})")
    date = item.get("question_date")
    if date is not None and not isinstance(date, str):
        raise DataError(file, where + "field 'question_date': expected a string")
    parsed, evidence = [], []
    for index, (sid, sdate, turns) in enumerate(zip(ids, dates, sessions), 1):
        if not isinstance(turns, list):
            raise DataError(file, where + f"field 'haystack_sessions' (session {sid}): expected a list of turns")
        out = []
        for t, turn in enumerate(turns, 1):
            if not isinstance(turn, dict) or not isinstance(turn.get("role"), str) or not isinstance(turn.get("content"), str):
                raise DataError(file, where + f"field 'haystack_sessions' (session {sid}, turn {t}): expected "
                                              "{role, content} strings")
            out.append(Turn(f"{sid}:{t}", turn["role"], turn["content"]))
            if turn.get("has_answer") is True:
                evidence.append(f"{sid}:{t}")
        parsed.append(Session(index, sdate, out))
    abstain = qid.endswith("_abs")
    qa = QA(item["question"], str(item["answer"]), tuple(evidence), ABSTENTION if abstain else _TYPES[kind],
            id=qid, evidence_sessions=tuple(item["answer_session_ids"]), date=date, abstain=abstain, kind=kind)
    # questions asked of the same haystack are one cluster (stats: resampled together)
    haystack = hashlib.blake2b("\x1f".join(sorted(str(i) for i in ids)).encode("utf-8"), digest_size=8).hexdigest()
    return Conversation(qid, ("user", "assistant"), parsed, [qa], cluster="haystack:" + haystack)


def load_longmemeval(path: str | Path) -> list[Conversation]:
    """Every question of a LongMemEval file, in file order, each as a conversation of its own."""
    path = Path(path)
    if path.is_dir():
        raise DataError(str(path), "expected a LongMemEval JSON file (longmemeval_oracle.json, longmemeval_s*.json, "
                                   "longmemeval_m*.json), got a folder")
    check_path(path)
    document = read_json(path)
    if not isinstance(document, list):
        raise DataError(str(path), f"expected a list of questions (the LongMemEval format), got {type(document).__name__}")
    conversations = [_question(item, n, str(path)) for n, item in enumerate(document, 1)]
    if not conversations:
        raise DataError(str(path), "no LongMemEval questions found")
    seen: set[str] = set()
    for c in conversations:
        if c.id in seen:
            raise DataError(str(path), f"question {c.id}: field 'question_id': appears twice")
        seen.add(c.id)
    return conversations


def off_by_one(answer: str, reference: str) -> bool:
    """Whether ``answer`` gives a count of the reference's unit off by at most one (LongMemEval's
    temporal rule: 19 days for 18 days passes).

    >>> off_by_one("It was 19 days later.", "18 days"), off_by_one("3 weeks", "18 days"), off_by_one("17 days", "18 days")
    (True, False, True)
    """
    wanted = [(int(n), unit.lower()) for n, unit in _COUNT.findall(reference)]
    given = [(int(n), unit.lower()) for n, unit in _COUNT.findall(answer)]
    return bool(wanted) and any(abs(n - m) <= 1 and unit == u for n, unit in wanted for m, u in given)


def offline_verdict(qa: QA, keyword_verdict: int | None, answer: str) -> int | None:
    """The offline judge's verdict on a LongMemEval question (not abstention): the keyword verdict;
    for temporal questions an off-by-one count passes too; a preference question's reference is a
    rubric that keyword overlap cannot judge: None (unjudged, counted), never a 0."""
    if qa.category == PREFERENCE:
        return None
    if qa.category == TEMPORAL and keyword_verdict == 0 and off_by_one(answer, qa.answer):
        return 1
    return keyword_verdict
