"""LongMemEval: the published format read and validated, each question over its own history, the
per-type judge rules, abstention apart, turn- and session-level recall@k; every expected figure here
is computed by hand from ``tests/longmemeval/longmemeval_mini.json`` (seven questions written in the
published format: one per question type and one ``_abs`` question)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ragmem.errors import DataError
from tests.conftest import ROOT

MINI = ROOT / "tests" / "longmemeval" / "longmemeval_mini.json"
TODAY = "2023/06/10 (Sat) 09:00"

#: what the scripted layer recalls per question (turn ids), and what the generator answers
RECALL = {
    "What breed is my dog?": ["s_u1_a:1", "s_u1_b:1"],
    "Which pasta dish did you recommend for a quick dinner?": ["s_a1_b:2"],
    "Can you suggest a dinner recipe for tonight?": ["s_p1_a:1"],
    "Which instruments do I play?": ["s_m1_a:1"],
    "Which city do I live in now?": ["s_k1_a:1"],
    "How many days passed between adopting Max and his first vet visit?": ["s_t1_a:1", "s_t1_b:1"],
    "What breed is my cat?": ["s_u2_a:1"],
}
ANSWERS = {
    "What breed is my dog?": "Your dog is a golden retriever.",              # right
    "Which pasta dish did you recommend for a quick dinner?": "I recommended carbonara.",  # wrong
    "Can you suggest a dinner recipe for tonight?": "Try a vegetarian chili tonight.",  # a rubric: offline, no verdict
    "Which instruments do I play?": "You play the guitar.",                  # half of the answer: wrong
    "Which city do I live in now?": "You live in Seattle.",                  # the old value: wrong
    "How many days passed between adopting Max and his first vet visit?": "19 days passed.",  # off by one: right
    "What breed is my cat?": "I don't know; you never mentioned a cat.",      # abstains: right
}


class Scripted:
    """A memory layer that keeps what it is given and recalls the turns of :data:`RECALL`."""

    def __init__(self):
        self.store: dict[str, dict[str, str]] = {}
        self.adds: list[tuple[str, list[str], list[str], str | None]] = []
        self.resets = 0

    def add(self, messages, user_id, timestamp=None):
        self.adds.append((user_id, [m["id"] for m in messages], [m["role"] for m in messages], timestamp))
        self.store.setdefault(user_id, {}).update({m["id"]: m["content"] for m in messages})

    def search(self, query, user_id, top_k):
        return [{"id": i, "text": self.store[user_id][i]} for i in RECALL[query][:top_k]]

    def reset(self):
        self.resets += 1
        self.store.clear()


def test_the_published_format_is_read_one_conversation_per_question():
    from ragmem.memory.longmemeval import load_longmemeval

    conversations = load_longmemeval(MINI)
    assert [c.id for c in conversations] == ["u1", "a1", "p1", "m1", "k1", "t1", "u2_abs"]
    t1 = conversations[5]
    assert [s.date_time for s in t1.sessions] == ["2023/05/20 (Sat) 10:00", "2023/06/07 (Wed) 17:00"]
    assert [t.dia_id for t in t1.sessions[0].turns] == ["s_t1_a:1", "s_t1_a:2"]
    assert [t.speaker for t in t1.sessions[0].turns] == ["user", "assistant"]
    qa = t1.qa[0]
    assert (qa.category, qa.kind, qa.date, qa.abstain) == (6, "temporal-reasoning", TODAY, False)
    assert qa.evidence == ("s_t1_a:1", "s_t1_b:1") and qa.evidence_sessions == ("s_t1_a", "s_t1_b")
    abstention = conversations[6].qa[0]
    # an _abs question is abstention whatever its type; its answer explains why; no has_answer turn
    assert (abstention.category, abstention.kind, abstention.abstain, abstention.evidence) == (7, "single-session-user", True, ())
    assert conversations[1].qa[0].evidence == ("s_a1_a:2",)  # the assistant's turn holds the answer


def _write(tmp_path, change) -> Path:
    items = json.loads(MINI.read_text())
    change(items)
    path = tmp_path / "longmemeval_bad.json"
    path.write_text(json.dumps(items))
    return path


@pytest.mark.parametrize("change, message", [
    (lambda items: items[4].pop("answer_session_ids"), "question k1: field 'answer_session_ids': missing"),
    (lambda items: items[2].update(question_type="preference"), "question p1: field 'question_type': expected one of"),
    (lambda items: items[1]["haystack_dates"].pop(), "question a1: field 'haystack_sessions': expected one list of turns"),
    (lambda items: items[3]["haystack_sessions"][1].append({"role": "user"}),
     r"question m1: field 'haystack_sessions' \(session s_m1_b, turn 3\): expected \{role, content\} strings"),
    (lambda items: items[0].update(answer=None), "question u1: field 'answer': expected a string or a number"),
    (lambda items: items[6].update(question_id="u1"), "question u1: field 'question_id': appears twice"),
    (lambda items: items[0].update(haystack_session_ids="s_u1_a"), "question u1: field 'haystack_session_ids': expected a list"),
])
def test_a_file_not_in_the_format_names_the_question_and_the_field(tmp_path, change, message):
    from ragmem.memory.longmemeval import load_longmemeval

    path = _write(tmp_path, change)
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}: {message}"):
        load_longmemeval(path)


def test_a_file_that_is_not_a_list_of_questions_and_a_folder_are_refused(tmp_path):
    from ragmem.memory.longmemeval import load_longmemeval

    locomo_shaped = tmp_path / "conv.json"
    locomo_shaped.write_text(json.dumps({"speaker_a": "A", "session_1": []}))
    with pytest.raises(DataError, match="expected a list of questions \\(the LongMemEval format\\), got dict"):
        load_longmemeval(locomo_shaped)
    with pytest.raises(DataError, match="got a folder"):
        load_longmemeval(tmp_path)


def _bench(tmp_path, stub, **bench):
    from ragmem.run import engine

    return engine.bench_memory({
        "experiment": "longmemeval", "tracking": {"enabled": False}, "seed": 3, "stats": {"resamples": 200},
        "bench": {"dataset": "longmemeval", "data": str(MINI), "top_k": 5,
                  "methods": [{"name": "scripted", "type": "python", "target": "tests.memory.test_longmemeval:Scripted"},
                              "no_memory"], **bench},
        "generator": {"type": "openai", "model": "g", "base_url": stub.base_url, "api_key_env": "NO_KEY_NEEDED"},
        "judge": {"type": "keyword", "threshold": 0.7}}, preflight=False)


def _generator():
    from tests.openai_stub import Stub

    def chat(request):
        question = re.search(r"<question>(.*)</question>", request["messages"][-1]["content"], re.S).group(1)
        asked_at = re.match(r"\(Today is (.*?)\.\) (.*)", question)
        return ANSWERS[asked_at.group(2)] if asked_at and asked_at.group(1) == TODAY else "the question came without its date"

    return Stub(chat=chat)


def test_per_type_accuracy_and_recall_at_k_equal_the_hand_computed_values(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_KEY_NEEDED", "x")
    with _generator() as stub:
        result = _bench(tmp_path, stub)
    metrics = {m["method"]: m["metrics"] for m in result["methods"]}
    m = metrics["scripted"]
    # J per type: dog 1, pasta 0, preference unjudged offline (a rubric), instruments 0 (one of two),
    # city 0 (the old value), days 1 (19 for 18: the off-by-one rule); the _abs question abstained: 1
    assert [m[f"judge_score_cat{c}"] for c in range(1, 8)] == [1.0, 0.0, None, 0.0, 0.0, 1.0, 1.0]
    assert m["judge_score"] == pytest.approx(2 / 5) and m["n_judge_failures"] == 1
    # session recall@5: dog {a,b}∩{a} 1, pasta {b}∩{a} 0, preference 1, instruments {a}∩{a,b} 1/2,
    # city {a}∩{b} 0, days 1 -> 3.5/6; turn recall the same here; the _abs question apart (its session 1)
    assert [m[f"session_recall_cat{c}"] for c in range(1, 8)] == [1.0, 0.0, 1.0, 0.5, 0.0, 1.0, 1.0]
    assert m["session_recall"] == pytest.approx(3.5 / 6) and m["evidence_recall"] == pytest.approx(3.5 / 6)
    assert m["evidence_recall_cat7"] is None  # no has_answer turn: undefined, not 0
    assert [m[f"n_questions_cat{c}"] for c in range(1, 8)] == [1.0] * 7 and m["n_questions"] == 6
    assert m["token_f1_cat3"] is None and m["token_f1_cat7"] is None  # a rubric, an explanation: nothing to overlap
    # no memory: the same answers (the generator is scripted), no ids to recall: null, counted
    none = metrics["no_memory"]
    assert none["session_recall"] is None and none["n_evidence_undefined"] == 7
    assert result["dataset"] == "longmemeval" and result["categories"][7] == "abstention"
    assert result["category_source"].startswith("xiaowu0162/LongMemEval")
    rows = {r["method"]: r for r in result["results_table"]}
    assert rows["scripted"]["temporal-reasoning J"] == 1.0 and rows["scripted"]["abstention J"] == 1.0
    assert rows["scripted"]["session recall"] == pytest.approx(3.5 / 6)
    # the same answers from both layers: no difference is marked
    assert result["paired"] and not any(p["marked"] for p in result["paired"])
    assert result["manifest"]["benchmark"] == "longmemeval" and "round-robin across the question types" in result[
        "manifest"]["question_selection"]


def test_each_question_is_its_own_history_ingested_in_order_with_dates(tmp_path):
    from ragmem.memory.longmemeval import load_longmemeval
    from ragmem.memory.benchmark import run_conversation

    layer = Scripted()
    asked = []
    for conversation in load_longmemeval(MINI)[3:6]:
        run_conversation(layer, conversation, conversation.qa, 5, lambda q, contexts: asked.append(q) or "x", "longmemeval")
    assert layer.resets == 3  # reset before each question's history
    assert layer.adds[:2] == [("longmemeval-m1", ["s_m1_a:1", "s_m1_a:2"], ["user", "assistant"], "2023/04/02 (Sun) 15:00"),
                              ("longmemeval-m1", ["s_m1_b:1", "s_m1_b:2"], ["user", "assistant"], "2023/05/14 (Sun) 16:00")]
    assert [a[0] for a in layer.adds] == ["longmemeval-m1"] * 2 + ["longmemeval-k1"] * 2 + ["longmemeval-t1"] * 2
    assert asked[2] == f"(Today is {TODAY}.) How many days passed between adopting Max and his first vet visit?"


def test_a_guess_at_an_abstention_and_the_old_value_of_an_update_fail_offline():
    from ragmem.memory.bench_data import DATASETS
    from ragmem.judges.keyword import KeywordJudge
    from ragmem.memory.longmemeval import load_longmemeval
    from ragmem.memory.benchmark import Answered, judge_answers
    from ragmem.text.keywords import KeywordExtractor

    qas = {c.id: c.qa[0] for c in load_longmemeval(MINI)}
    cases = [("u2_abs", "I don't know; you never mentioned a cat.", 1), ("u2_abs", "Your cat is a Siamese.", 0),
             ("k1", "You live in Seattle.", 0), ("k1", "You moved from Seattle to Portland.", 1),
             ("t1", "19 days passed.", 1), ("t1", "17 days.", 1), ("t1", "25 days.", 0), ("t1", "18 days.", 1),
             ("p1", "Try a vegetarian chili.", None), ("u1", "A golden retriever.", 1)]
    answered = [Answered(q, qas[q], answer, [], 0.0, 0.0) for q, answer, _ in cases]
    verdicts = judge_answers(KeywordJudge(KeywordExtractor(), 0.7), answered, DATASETS["longmemeval"])
    assert verdicts == [expected for _, _, expected in cases]


def test_an_llm_judge_is_asked_each_type_s_own_rule(tmp_path, monkeypatch):
    from tests.openai_stub import Stub, data_block, user_text

    # (the temporal rule is the general one and its off-by-one)
    rules = {"off by one": "temporal", "every intermediate step that leads to it": "answer",
             "is that updated value": "update", "is a rubric": "preference", "identifies the question as unanswerable": "abstention"}
    asked: dict[str, str] = {}

    def judge(request):
        text = user_text(request)
        rule = [name for phrase, name in rules.items() if phrase in text][:1]
        asked[data_block(request, "question")] = rule[0] if rule else "no rule"
        return {"verdict": "yes" if rule == ["temporal"] or rule == ["abstention"] else "no", "reason": "r"}

    monkeypatch.setenv("NO_KEY_NEEDED", "x")
    with _generator() as generator, Stub(chat=judge) as judge_stub:
        from ragmem.run import engine

        result = engine.bench_memory({
            "experiment": "longmemeval", "tracking": {"enabled": False}, "metrics": ["pass_rate"],
            "bench": {"dataset": "longmemeval", "data": str(MINI), "methods": [
                {"name": "scripted", "type": "python", "target": "tests.memory.test_longmemeval:Scripted"}]},
            "generator": {"type": "openai", "model": "g", "base_url": generator.base_url, "api_key_env": "NO_KEY_NEEDED"},
            "judge": {"type": "llm", "model": "j", "base_url": judge_stub.base_url, "cache_dir": str(tmp_path / "cache"),
                      "api_key_env": "NO_KEY_NEEDED"}}, preflight=False)
    assert asked == {"What breed is my dog?": "answer", "Which pasta dish did you recommend for a quick dinner?": "answer",
                     "Which instruments do I play?": "answer", "Which city do I live in now?": "update",
                     "How many days passed between adopting Max and his first vet visit?": "temporal",
                     "Can you suggest a dinner recipe for tonight?": "preference", "What breed is my cat?": "abstention"}
    m = result["methods"][0]["metrics"]
    assert [m[f"judge_score_cat{c}"] for c in range(1, 8)] == [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0]


def test_a_question_limit_keeps_every_question_type(tmp_path, monkeypatch):
    from ragmem.memory.bench_data import DATASETS
    from ragmem.memory.longmemeval import load_longmemeval

    items = json.loads(MINI.read_text())
    more = [dict(item, question_id=f"{item['question_id'].removesuffix('_abs')}_{n}" + ("_abs" if item["question_id"].endswith("_abs") else ""))
            for n in range(3) for item in items]
    path = tmp_path / "longmemeval_s.json"
    path.write_text(json.dumps(more))
    selected = DATASETS["longmemeval"].select(load_longmemeval(path), None, 9)
    picked = [qs[0] for qs in selected.values()]
    assert len(picked) == 9 and {q.category for q in picked} == set(range(1, 8))
    # round-robin: one of each category (file order), then the next of the first two categories
    assert list(selected) == ["u1_0", "a1_0", "p1_0", "m1_0", "k1_0", "t1_0", "u2_0_abs", "u1_1", "a1_1"]
