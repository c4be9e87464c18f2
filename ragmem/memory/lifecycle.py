"""The lifecycle suite of ``ragmem bench-memory`` (``bench.dataset: lifecycle``, ``--suite lifecycle``):
what a memory layer is for, beyond recall: changing and forgetting. Generated with the run's seed, in
English and Chinese, each scenario a conversation of its own with a planted truth, so that its score
is exact offline and the oracle is the scenario itself.

=============  ==========================================================================================
recall         a fact stated, then asked: the answer gives it
update         a fact, then its change ("I moved from Lyon to Porto"): the answer gives the new value and
               does not assert the old one (the change's own words, "from Lyon to Porto", aside)
contradiction  two statements that conflict, never resolved: the answer gives both, or says they conflict
deletion       a fact, then the user asks to forget it: through the layer's ``delete`` when it has one (the
               memories holding the fact, found by ``search``, each deleted), else as the user's statement;
               the answer must not give it, and the layer's recall is inspected for it:
               ``deleted_still_recalled`` (the share of deleted facts the layer still returns: must be 0;
               its complement, ``deletion_compliance``, is what the table shows)
distractor     the fact among 50 similar ones (colleagues' cities): the answer gives the user's own
cross_session  the fact stated in the first session, asked three sessions later after unrelated talk
=============  ==========================================================================================

An update goes through the layer's ``update(memory_id, text, user_id)`` the same way when it has one
(each memory holding the old value rewritten to the new fact). Which path each layer took (``api`` or
``statement``) is recorded and shown. Limits: the checks read the answer's words (a value named or
not), so an answer that names the old value to deny it fails the update check, and the generator
(extractive by default) is part of what is measured: an extractive answer cannot say that two
statements conflict, so every layer scores 0 on contradiction with it.
"""

from __future__ import annotations

import random
from typing import Any

from ragmem.memory.locomo import Conversation, QA, Session, Turn

SCENARIOS = ("recall", "update", "contradiction", "deletion", "distractor", "cross_session")
CATEGORIES = {n: name for n, name in enumerate(SCENARIOS, 1)}
DELETION = 4
CATEGORY_SOURCE = ("ragmem's lifecycle suite (ragmem.memory.lifecycle): generated scenarios with planted truths, "
                   "scored exactly by the answer's words; deletion also by what the layer still recalls")
CONFLICT = ("conflict", "contradict", "both", "two different", "矛盾", "不一致", "两种说法")

_CITIES = {"en": ["Lyon", "Porto", "Oslo", "Kyoto", "Lima", "Quito", "Tallinn", "Dakar", "Hobart", "Bergen", "Cusco",
                  "Malmo", "Nantes", "Perugia", "Tartu"],
           "zh": ["里昂", "波尔图", "奥斯陆", "京都", "利马", "基多", "塔林", "达喀尔", "霍巴特", "卑尔根", "库斯科",
                  "马尔默", "南特", "佩鲁贾", "塔尔图"]}
_NAMES = {"en": ["Ana", "Ben", "Chloe", "Dev", "Emil", "Fatou", "Goran", "Hana", "Ivo", "Jun"],
          "zh": ["安娜", "本", "克洛伊", "德夫", "埃米尔", "法图", "戈兰", "哈娜", "伊沃", "俊"]}
_SAY: dict[str, dict[str, Any]] = {
    "en": {"fact": "I live in {v}.", "question": "Where do I live now?", "moved": "I moved from {old} to {new}.",
           "new_fact": "I live in {v}.", "other": "I have only ever lived in {v}.",
           "forget": "Please forget where I live; do not keep my address.", "colleague": "My colleague {n} lives in {v}.",
           "filler": ["The weather was mild today.", "I finished reading a novel about sailors.",
                      "We talked about a recipe for lentil soup.", "My team shipped a small release."]},
    "zh": {"fact": "我住在{v}。", "question": "我现在住在哪里？", "moved": "我从{old}搬到了{new}。",
           "new_fact": "我住在{v}。", "other": "我一直只住在{v}。", "forget": "请忘记我住在哪里，不要保留我的地址。",
           "colleague": "我的同事{n}住在{v}。",
           "filler": ["今天天气很温和。", "我读完了一本关于水手的小说。", "我们聊了扁豆汤的做法。", "我的团队发布了一个小版本。"]},
}


def _moved_phrase(language: str, old: str, new: str) -> str:
    """The words of the change itself, which name the old value without asserting it."""
    return f"from {old} to {new}" if language == "en" else f"从{old}搬到了{new}"


def _conversation(kind: str, language: str, number: int, rng: random.Random) -> Conversation:
    say, cities = _SAY[language], list(_CITIES[language])
    rng.shuffle(cities)
    value, other = cities[0], cities[1]
    cid = f"{kind}-{language}-{number}"
    sessions: list[Session] = []

    def session(*texts: str, operation: str | None = None, target: str | None = None) -> None:
        index = len(sessions) + 1
        turns = [Turn(f"{cid}-s{index}:{t}", "user", text) for t, text in enumerate(texts, 1)]
        sessions.append(Session(index, f"2026-0{min(index, 9)}-01", turns, operation=operation, target=target))

    values: tuple[str, ...] = (value,)
    forbidden: tuple[str, ...] = ()
    answer = value
    if kind in ("recall", "deletion", "update", "contradiction"):
        session(say["fact"].format(v=value))
    if kind == "update":
        # (the change as said, then the fact it leaves: a layer's update() is given that fact)
        session(say["moved"].format(old=value, new=other), say["new_fact"].format(v=other), operation="update",
                target=value)
        answer, values, forbidden = other, (other, value, _moved_phrase(language, value, other)), (value,)
    elif kind == "contradiction":
        session(say["other"].format(v=other))
        answer, values = f"{value} / {other}", (value, other)
    elif kind == "deletion":
        session(say["forget"], operation="delete", target=value)
        answer, forbidden = "", (value,)
    elif kind == "distractor":
        names = _NAMES[language]
        lines = [say["colleague"].format(n=names[i % len(names)], v=cities[2 + i % (len(cities) - 2)]) for i in range(50)]
        lines.insert(rng.randrange(len(lines) + 1), say["fact"].format(v=value))
        for start in range(0, len(lines), 10):
            session(*lines[start:start + 10])
    elif kind == "cross_session":
        session(say["fact"].format(v=value))
        for filler in rng.sample(say["filler"], 3):
            session(filler)
    evidence = tuple(t.dia_id for s in sessions for t in s.turns if value in t.text and s.operation is None)
    qa = QA(say["question"], answer, evidence, SCENARIOS.index(kind) + 1, id=cid, kind=kind,
            abstain=kind == "deletion", values=values, forbidden=forbidden)
    return Conversation(cid, ("user", "assistant"), sessions, [qa])


def scenarios(seed: int = 0, per_kind: int = 2) -> list[Conversation]:
    """``per_kind`` scenarios of each kind in each language, drawn with ``seed``."""
    rng = random.Random(seed)
    return [_conversation(kind, language, n, rng) for kind in SCENARIOS for language in ("en", "zh")
            for n in range(1, per_kind + 1)]


def load_lifecycle(path: str) -> list[Conversation]:
    """The suite's conversations (``bench.data``: ``seed:N`` or ``seed:N/per_kind:K``; empty: seed 0, 2 each)."""
    settings = dict(part.split(":", 1) for part in str(path or "").split("/") if ":" in part)
    return scenarios(int(settings.get("seed", 0)), int(settings.get("per_kind", 2)))


def verdict(qa: QA, answer: str | None) -> float:
    """The planted truth's check of an answer (module docstring): 1 or 0."""
    text = (answer or "").lower()
    has = lambda v: v.lower() in text  # noqa: E731
    if qa.kind == "update":
        new, old, phrase = qa.values
        return float(has(new) and old.lower() not in text.replace(phrase.lower(), ""))
    if qa.kind == "contradiction":
        return float(all(has(v) for v in qa.values) or any(word in text for word in CONFLICT))
    if qa.kind == "deletion":
        return float(not any(has(v) for v in qa.forbidden))
    return float(has(qa.values[0]))


def still_recalled(qa: QA, memories: list[dict[str, Any]]) -> float | None:
    """Deletion: 1 when a memory the layer returns still holds the deleted fact, else 0; None elsewhere."""
    if qa.kind != "deletion":
        return None
    return float(any(v.lower() in str(m.get("text", "")).lower() for v in qa.forbidden for m in memories))
