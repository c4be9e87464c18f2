"""BEAM (Tavakoli et al., "Beyond a Million Tokens", ICLR 2026): long conversations with probing
questions of ten memory abilities, each question scored by its rubric.

Reads the published layout as it is (ragmem does not ship it): a folder holding, for each
conversation, ``chat.json`` (batches ``{batch_number, time_anchor, turns: [[{role, id, content,
time_anchor?}, ...], ...]}``) beside ``probing_questions.json`` (``{ability: [question, ...]}``; or in
``probing_questions/``, as the authors' repository keeps it: ``ragmem data fetch beam`` fetches that);
``--data`` names one conversation's folder or any folder above several (``chats/100K``, ``chats``),
each conversation's id its path below it (``100K/1``).

Each inner list of turns is a session, dated by the last ``time_anchor`` before it (on a batch or on
a turn: ``March-15-2024`` read as 2024-03-15); a turn's id is ``b{batch}s{n}:{id}`` (its session before the ``:``), so that a
question's ``source_chat_ids`` (the chat ids of the evidence, a list or lists by role) are evidence
turns as LoCoMo's are. A question's reference is its ``answer`` (or ``ideal_answer``,
``ideal_response``, ``ideal_summary``, ``expected_compliance``: the key varies by ability).

Scoring as BEAM defines it (:func:`judge`): each ``rubric`` item judged 0 / 0.5 / 1 by the LLM judge
(the item, the question and the answer: one request each, task ``beam_rubric_item``), the question's
score the mean of its items. Offline, each item is matched by keywords against the answer (its
words after "LLM response should state:"): the share found at least ``judge.threshold`` scores 1, at
least half of that 0.5, else 0; an abstention question scores 1 when the answer says the information
is not there. Event ordering is also scored by Kendall's tau (:func:`order_tau`) between the
reference order (``ordering_tested``) and the order the answer mentions the events in. Abstention
is one of the ten abilities, in the overall score as in BEAM's.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from ragmem.data.readers import check_path, read_json
from ragmem.errors import DataError
from ragmem.memory.locomo import Conversation, QA, Session, Turn

ABILITIES = ("abstention", "contradiction_resolution", "event_ordering", "information_extraction",
             "instruction_following", "knowledge_update", "multi_session_reasoning", "preference_following",
             "summarization", "temporal_reasoning")
#: the abilities as numbered here (the per-ability rows and the ``_cat{N}`` metrics)
CATEGORIES = {n: name for n, name in enumerate(ABILITIES, 1)}
ABSTENTION = 1
EVENT_ORDERING = 3
CATEGORY_SOURCE = ("BEAM (Tavakoli et al., ICLR 2026; arXiv 2510.27246) probing_questions.json: ten abilities; "
                   "each question's rubric items judged 0 / 0.5 / 1, its score their mean; event ordering also by "
                   "Kendall's tau against ordering_tested; abstention an ability like the others")
ANSWER_KEYS = ("answer", "ideal_answer", "ideal_response", "ideal_summary", "expected_compliance")
_RUBRIC_LEAD = re.compile(r"^\s*(?:the\s+)?(?:llm\s+)?(?:response|answer)\s+should\s+[^:]{0,60}:\s*", re.IGNORECASE)
_ORDINAL = re.compile(r"^\s*\d+(?:st|nd|rd|th)?\s*[:.)-]\s*", re.IGNORECASE)


def _anchor(value: Any) -> str | None:
    """A batch's ``time_anchor`` as an ISO date (``March-15-2024`` -> ``2024-03-15``), else as given."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return datetime.strptime(value.strip(), "%B-%d-%Y").date().isoformat()
    except ValueError:
        return value.strip()


def _read(path: Path) -> Any:
    check_path(path)
    return read_json(path)


def _sessions(chat: Any, file: str) -> tuple[list[Session], dict[int, str]]:
    """The sessions of a ``chat.json`` and each chat id's turn id."""
    if not isinstance(chat, list) or not chat:
        raise DataError(file, "expected a list of batches {batch_number, time_anchor, turns} (BEAM's chat.json)")
    sessions: list[Session] = []
    ids: dict[int, str] = {}
    date: str | None = None
    for b, batch in enumerate(chat, 1):
        if not isinstance(batch, dict) or not isinstance(batch.get("turns"), list):
            raise DataError(file, f"batch {b}: expected an object with 'turns': a list of lists of turns")
        number = batch.get("batch_number", b)
        date = _anchor(batch.get("time_anchor")) or date
        for g, group in enumerate(batch["turns"], 1):
            if not isinstance(group, list):
                raise DataError(file, f"batch {number}, session {g}: expected a list of turns")
            # (the time anchor: on the batch, or on the first turn it holds for; it holds until the next)
            date = next((_anchor(t.get("time_anchor")) for t in group if isinstance(t, dict)
                         and _anchor(t.get("time_anchor"))), None) or date
            turns = []
            for t, turn in enumerate(group, 1):
                where = f"batch {number}, session {g}, turn {t}: "
                if not isinstance(turn, dict):
                    raise DataError(file, where + f"expected an object, got {type(turn).__name__}")
                for name, kind in (("role", str), ("content", str), ("id", int)):
                    if not isinstance(turn.get(name), kind) or isinstance(turn.get(name), bool):
                        raise DataError(file, where + f"field '{name}': expected {'an integer' if kind is int else 'a string'}")
                turn_id = f"b{number}s{g}:{turn['id']}"
                if turn["id"] in ids:
                    raise DataError(file, where + f"field 'id': {turn['id']} appears twice")
                ids[turn["id"]] = turn_id
                turns.append(Turn(turn_id, turn["role"], turn["content"]))
            sessions.append(Session(len(sessions) + 1, date, turns))
    return sessions, ids


def _chat_ids(value: Any) -> list[int]:
    """``source_chat_ids`` flattened: a list of ids, or lists of them by role (``first_statement``...)."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [i for v in value.values() for i in _chat_ids(v)]
    if isinstance(value, list):
        return [i for v in value for i in _chat_ids(v)]
    return [value] if isinstance(value, int) and not isinstance(value, bool) else []


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str) and v.strip()) if isinstance(value, list) else ()


def _question(item: Any, ability: str, n: int, cid: str, ids: dict[int, str], file: str) -> QA:
    where = f"{ability} question {n}: "
    if not isinstance(item, dict):
        raise DataError(file, where + f"expected an object, got {type(item).__name__}")
    if not isinstance(item.get("question"), str) or not item["question"].strip():
        raise DataError(file, where + "field 'question': expected a non-empty string")
    reference = next((item[k] for k in ANSWER_KEYS if isinstance(item.get(k), str) and item[k].strip()), None)
    if reference is None:
        raise DataError(file, where + f"no reference answer (one of the fields {', '.join(ANSWER_KEYS)})")
    rubric = _strings(item.get("rubric"))
    if not rubric:
        raise DataError(file, where + "field 'rubric': expected a non-empty list of strings (BEAM scores by it)")
    evidence = tuple(dict.fromkeys(ids.get(i, f"?:{i}") for i in _chat_ids(item.get("source_chat_ids"))))
    order = tuple(_ORDINAL.sub("", o).strip() for o in _strings(item.get("ordering_tested")))
    category = ABILITIES.index(ability) + 1
    return QA(item["question"], reference, evidence, category, id=f"{cid}/{ability}/{n}",
              abstain=category == ABSTENTION, kind=ability, rubric=rubric, order=order)


def _conversation(folder: Path, cid: str) -> Conversation:
    chat, probing = folder / "chat.json", folder / "probing_questions.json"
    if not probing.is_file():  # (the authors' repository: in a folder of its own)
        probing = folder / "probing_questions" / "probing_questions.json"
    if not probing.is_file():
        raise DataError(str(folder), "chat.json without probing_questions.json beside it or in probing_questions/ "
                                     "(BEAM's layout)")
    sessions, ids = _sessions(_read(chat), str(chat))
    questions = _read(probing)
    if not isinstance(questions, dict):
        raise DataError(str(probing), f"expected an object of ability -> questions, got {type(questions).__name__}")
    unknown = sorted(set(questions) - set(ABILITIES))
    if unknown:
        raise DataError(str(probing), f"unknown ability {unknown[0]!r} (BEAM's ten: {', '.join(ABILITIES)})")
    qa = []
    for ability in ABILITIES:
        items = questions.get(ability, [])
        if not isinstance(items, list):
            raise DataError(str(probing), f"{ability}: expected a list of questions")
        qa += [_question(item, ability, n, cid, ids, str(probing)) for n, item in enumerate(items, 1)]
    if not qa:
        raise DataError(str(probing), "no probing questions")
    return Conversation(cid, ("user", "assistant"), sessions, qa)


def load_beam(path: str | Path) -> list[Conversation]:
    """Every conversation under ``path`` (a conversation's folder, or one above several), in path order."""
    root = Path(path)
    if not root.exists():
        raise DataError(str(root), "no such folder (BEAM's chats: a folder of chat.json and probing_questions.json)")
    if root.is_file():
        raise DataError(str(root), "expected a folder (BEAM's layout: chat.json beside probing_questions.json), "
                                   "got a file")
    found = sorted((p.parent for p in root.rglob("chat.json")), key=lambda p: [int(x) if x.isdigit() else x
                                                                                 for x in p.relative_to(root).parts])
    if not found:
        raise DataError(str(root), "no BEAM conversation below it (no chat.json)")
    return [_conversation(f, f.relative_to(root).as_posix() if f != root else root.name) for f in found]


def rubric_text(item: str) -> str:
    """What a rubric item asks for, without its lead ("LLM response should state: March 29" -> "March 29").

    >>> rubric_text("LLM response should state: March 29"), rubric_text("Mentions the deadline")
    ('March 29', 'Mentions the deadline')
    """
    return _RUBRIC_LEAD.sub("", item).strip()


def offline_item(found: float, threshold: float) -> float:
    """An item's offline score from the share of its keywords the answer holds: 1 at ``threshold`` or
    more, 0.5 at half of it or more, else 0.

    >>> [offline_item(x, 0.7) for x in (0.8, 0.5, 0.2)]
    [1.0, 0.5, 0.0]
    """
    return 1.0 if found >= threshold else 0.5 if found >= threshold / 2 else 0.0


def order_tau(tokens: Sequence[str], events: Sequence[set[str]]) -> float | None:
    """Kendall's tau between the reference order of the events (each as its keywords, in that order)
    and the order the answer's ``tokens`` mention them in: an event is placed at the first token that
    is one of its keywords (a keyword two events share places neither), and tau is computed over the
    events placed (scipy's, tau-b); ``None`` with fewer than two placed (nothing to order).

    >>> events = [{"login", "page"}, {"payments", "api"}, {"deploy"}]
    >>> order_tau("first login then payments then deploy".split(), events)
    1.0
    >>> order_tau("deploy came before payments and login".split(), events)
    -1.0
    >>> order_tau("only the login".split(), events) is None
    True
    """
    from scipy.stats import kendalltau  # (scipy: imported when an event-ordering question is scored)

    shared = {w for i, a in enumerate(events) for b in events[i + 1:] for w in a & b}
    placed = []
    for rank, own in enumerate(events):
        at = next((i for i, w in enumerate(tokens) if w in own and w not in shared), None)
        if at is not None:
            placed.append((rank, at))
    if len(placed) < 2:
        return None
    tau = kendalltau([r for r, _ in placed], [a for _, a in placed]).statistic
    return None if tau != tau else float(tau)  # (NaN: every event at one place)
