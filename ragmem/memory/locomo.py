"""LoCoMo (Maharana et al., ACL 2024): long multi-session conversations with question/answer pairs.

Reads the per-conversation files (``locomo10.zip`` as published, a folder of them, or one file:
``{speaker_a, speaker_b, session_N: [turns], session_N_date_time, qa: [...]}``) and the single-list
shape (``locomo10.json``: ``[{sample_id, conversation: {...}, qa: [...]}]``).

Categories: :data:`CATEGORIES`, one table with its source (:data:`CATEGORY_SOURCE`), logged with
every benchmark run. Category 5 questions have ``adversarial_answer`` (a plausible but unsupported
answer) and no ``answer``: the information is not in the conversation. They are scored as
**abstention** (:mod:`ragmem.memory.benchmark`): correct when the answer says the information is not
there, reported in a column of their own and never mixed into the overall score, which stays that
of categories 1-4, as the published evaluations (mem0, Zep, LangMem, A-Mem) report it.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ragmem.data.readers import check_path, read_json
from ragmem.errors import DataError

#: LoCoMo's question categories, as its own evaluation code scores them
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
CATEGORY_SOURCE = ("snap-research/locomo task_eval/evaluation.py (eval_question_answering): category 1 "
                   "multi-hop (F1 over the comma-separated sub-answers), 2 temporal, 3 open-domain, 4 single-hop, "
                   "5 adversarial (correct when the answer says the information is not mentioned)")
ABSTENTION = 5  # the category scored as abstention, apart from the overall score
ADVERSARIAL_ANSWER = "Not mentioned in the conversation"
_SESSION = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str | None = None


@dataclass
class Session:
    index: int
    date_time: str | None
    turns: list[Turn]
    operation: str | None = None  # the lifecycle suite: "update" or "delete" of the fact ``target`` (its value)
    target: str | None = None


@dataclass(frozen=True)
class QA:
    """One question of a memory benchmark. ``evidence``: the turn ids that hold the answer;
    ``evidence_sessions``: the sessions that do (empty: the sessions of ``evidence``, a turn id's part
    before its last ``:``); ``abstain``: the answer is not in the history (scored as abstention);
    ``date``: when the question is asked; ``kind``: the dataset's own name for its type; ``rubric``
    and ``order``: BEAM's (:mod:`ragmem.memory.beam`)."""

    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int
    id: str | None = None
    evidence_sessions: tuple[str, ...] = ()
    date: str | None = None
    abstain: bool = False
    kind: str | None = None
    rubric: tuple[str, ...] = ()  # BEAM: the items a judge scores 0 / 0.5 / 1 (the question's score their mean)
    order: tuple[str, ...] = ()  # BEAM event ordering: the events in their reference order
    values: tuple[str, ...] = ()  # the lifecycle suite: the planted values its check reads
    forbidden: tuple[str, ...] = ()  # the lifecycle suite: values the answer must not assert (old, deleted)

    def sessions(self) -> set[str]:
        """The evidence sessions (see above)."""
        return set(self.evidence_sessions) or {session_of(e) for e in self.evidence}


def session_of(turn_id: str) -> str:
    """The session of a turn id (``D1:3`` -> ``D1``; ``answer_4be1b6b4_2:5`` -> ``answer_4be1b6b4_2``)."""
    return str(turn_id).rsplit(":", 1)[0]


@dataclass
class Conversation:
    id: str
    speakers: tuple[str, str]
    sessions: list[Session]
    qa: list[QA] = field(default_factory=list)
    cluster: str | None = None  # what its questions are resampled with (default: the conversation itself)

    @property
    def n_turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


def _parse_conversation(raw: Any, qa: Any, cid: str, file: str) -> Conversation:
    if not isinstance(raw, dict):
        raise DataError(file, f"conversation {cid}: expected an object, got {type(raw).__name__}")
    sessions = []
    numbered = {k: int(m.group(1)) for k in raw if (m := _SESSION.match(k))}
    for key in sorted(numbered, key=numbered.__getitem__):
        index = numbered[key]
        turns_raw = raw[key]
        if not isinstance(turns_raw, list):
            raise DataError(file, f"conversation {cid}: {key}: expected a list of turns")
        turns = []
        for n, t in enumerate(turns_raw, 1):
            where = f"conversation {cid}: {key} turn {n}: "
            if not isinstance(t, dict):
                raise DataError(file, where + f"expected an object, got {type(t).__name__}")
            for name in ("speaker", "dia_id", "text"):
                if not isinstance(t.get(name), str) or (name != "text" and not t[name].strip()):
                    raise DataError(file, where + f"field '{name}': missing or not a string")
            caption = t.get("blip_caption")
            turns.append(Turn(t["dia_id"], t["speaker"], t["text"], caption if isinstance(caption, str) else None))
        date = raw.get(f"{key}_date_time")
        sessions.append(Session(index, date if isinstance(date, str) else None, turns))
    if not sessions:
        raise DataError(file, f"conversation {cid}: no session_N lists found")
    questions = []
    for n, q in enumerate(qa or [], 1):
        where = f"conversation {cid}: qa {n}: "
        if not isinstance(q, dict) or not isinstance(q.get("question"), str):
            raise DataError(file, where + "field 'question': missing or not a string")
        category = q.get("category")
        if category not in CATEGORIES:
            raise DataError(file, where + f"field 'category': expected 1-5, got {category!r}")
        if category == 5:
            answer = ADVERSARIAL_ANSWER
        else:
            if q.get("answer") is None:
                raise DataError(file, where + "field 'answer': missing")
            answer = str(q["answer"])
        evidence = q.get("evidence") or []
        if not isinstance(evidence, list):
            raise DataError(file, where + "field 'evidence': expected a list of dia_ids")
        questions.append(QA(q["question"], answer, tuple(str(e) for e in evidence), category,
                            abstain=category == ABSTENTION, kind=CATEGORIES[category]))
    # evidence ids are kept as published (a few name turns that do not exist)
    speakers = (str(raw.get("speaker_a", "A")), str(raw.get("speaker_b", "B")))
    return Conversation(cid, speakers, sessions, questions)


def _documents(path: Path) -> Iterable[tuple[str, str, Any]]:
    """(file label, default id, parsed JSON) for every conversation document under ``path``."""
    if path.suffix == ".zip":
        try:
            archive = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as exc:
            raise DataError(str(path), f"not a readable zip archive ({exc})") from None
        with archive:
            for name in sorted(n for n in archive.namelist() if n.endswith(".json")):
                try:
                    yield f"{path}:{name}", Path(name).stem, json.loads(archive.read(name))
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}:{name}", f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
                except UnicodeDecodeError as exc:
                    raise DataError(f"{path}:{name}", f"not UTF-8 text (byte offset {exc.start})") from None
    elif path.is_dir():
        for file in sorted(path.rglob("*.json")):
            yield from _documents(file)
    else:
        yield str(path), path.stem, read_json(path)


def load_locomo(path: str | Path) -> list[Conversation]:
    """Every conversation under ``path`` (zip, folder or file), in file order, with all its
    questions (category 5 answered ``ADVERSARIAL_ANSWER``); :func:`questions` selects what is scored."""
    path = Path(path)
    if not path.is_dir():
        check_path(path)  # missing, a device, a symlink loop: named before reading
    conversations: list[Conversation] = []
    for file, default_id, doc in _documents(path):
        if isinstance(doc, list):  # locomo10.json
            for n, item in enumerate(doc, 1):
                if not isinstance(item, dict) or "conversation" not in item:
                    raise DataError(file, f"item {n}: expected {{sample_id, conversation, qa}}")
                conversations.append(_parse_conversation(item["conversation"], item.get("qa"),
                                                         str(item.get("sample_id", n)), file))
        else:
            conversations.append(_parse_conversation(doc, doc.get("qa") if isinstance(doc, dict) else None,
                                                     default_id, file))
    if not conversations:
        raise DataError(str(path), "no LoCoMo conversations found")
    return conversations


def questions(conversation: Conversation, limit: int | None = None) -> list[QA]:
    """The scored questions (every category, abstention included), in conversation order. With
    ``limit``, taken round-robin across the categories (in conversation order within each), so that
    a quick run keeps every category when ``limit`` allows: the first 20 questions of a conversation
    may hold none of some category."""
    return round_robin(conversation.qa, limit)


def round_robin(qas: Iterable[QA], limit: int | None = None) -> list[QA]:
    """``limit`` of ``qas`` taken round-robin across their categories (in order within each),
    returned in their order; all of them without a limit."""
    selected = list(qas)
    if not limit or limit >= len(selected):
        return selected
    by_category: dict[int, list[QA]] = {}
    for q in selected:
        by_category.setdefault(q.category, []).append(q)
    queues = [list(reversed(qs)) for _, qs in sorted(by_category.items())]
    picked: set[int] = set()
    while len(picked) < limit:
        for queue in queues:
            if queue and len(picked) < limit:
                picked.add(id(queue.pop()))
    return [q for q in selected if id(q) in picked]
