"""BEAM (issue 59): the published layout read as it is (the workplace's two 100K conversations, when
present), each question scored by its rubric (an LLM judge: one request an item, 0 / 0.5 / 1, the
rerun from the cache; offline: the items matched by keywords, by hand here), event ordering by
Kendall's tau (against the count of concordant pairs), abstention an ability in the overall, and the
per-ability table with its intervals."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from ragmem.errors import DataError
from ragmem.memory import beam
from tests.conftest import ROOT

SHARED = ROOT.parent / "shared" / "data" / "beam"


def _needs_shared():
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} not found (the workplace's shared BEAM conversations are absent)")


def test_the_published_layout_is_read_with_its_ten_abilities_dates_and_evidence():
    _needs_shared()
    conversations = beam.load_beam(SHARED)
    assert [c.id for c in conversations] == ["100K/1", "100K/2"]
    first = conversations[0]
    assert len(first.qa) == 20 and first.n_turns == 188 and len(first.sessions) == 78
    assert [q.kind for q in first.qa[::2]] == list(beam.ABILITIES)  # two a ability, in BEAM's order
    assert first.sessions[0].date_time == "2024-03-15" and first.sessions[-1].date_time == "2024-04-25"
    extraction = next(q for q in first.qa if q.kind == "information_extraction")
    assert extraction.answer == "My first sprint ends on March 29." and extraction.rubric == ("LLM response should state: March 29",)
    assert [e.rsplit(":", 1)[1] for e in extraction.evidence] == ["28"]
    contradiction = next(q for q in first.qa if q.kind == "contradiction_resolution")
    assert sorted(e.rsplit(":", 1)[1] for e in contradiction.evidence) == ["24", "58"]  # (by role: both statements)
    following = next(q for q in first.qa if q.kind == "instruction_following")
    assert following.answer.startswith("Response should include code examples")  # (its expected_compliance)
    abstention = [q for q in first.qa if q.abstain]
    assert len(abstention) == 2 and all(q.category == beam.ABSTENTION and not q.evidence for q in abstention)
    ordering = next(q for q in first.qa if q.kind == "event_ordering")
    assert ordering.order == ("Core functionality", "Transaction error handling", "Security and deployment")


def _layout(folder, questions: dict, turns: int = 8) -> None:
    """A BEAM conversation of ``turns`` turns in two batches (anchored on their first turns)."""
    folder.mkdir(parents=True)
    batch = lambda number, ids, day: {"batch_number": number, "time_anchor": None, "turns": [  # noqa: E731
        [{"role": "user" if i % 2 == 0 else "assistant", "id": i, "content": f"turn {i}: " + TEXTS.get(i, "small talk"),
          **({"time_anchor": day} if i == ids[0] else {})} for i in ids]]}
    half = turns // 2
    chat = [batch(1, list(range(half)), "March-15-2024"), batch(2, list(range(half, turns)), "April-05-2024")]
    (folder / "chat.json").write_text(json.dumps(chat), encoding="utf-8")
    (folder / "probing_questions.json").write_text(json.dumps(questions), encoding="utf-8")


TEXTS = {0: "my sprint ends on March 29", 2: "I deployed the login page", 4: "then I built the payments api",
         6: "finally I set up the deploy pipeline"}
QUESTIONS = {
    "information_extraction": [{"question": "When does my sprint end?", "answer": "March 29",
                                "source_chat_ids": [0], "rubric": ["LLM response should state: March 29"]}],
    "event_ordering": [{"question": "In which order did I build things?", "answer": "login, payments, deploy",
                        "ordering_tested": ["1st: login page", "2nd: payments api", "3rd: deploy pipeline"],
                        "source_chat_ids": [2, 4, 6],
                        "rubric": ["LLM response should mention: login page", "LLM response should mention: payments api",
                                   "LLM response should mention: deploy pipeline"]}],
    "abstention": [{"question": "What is my cat called?", "ideal_response": "There is no information about a cat.",
                    "rubric": ["Based on the provided chat, there is no information related to a cat"]}],
}


def test_offline_each_rubric_item_is_matched_by_its_keywords_and_abstention_by_saying_so():
    """By hand: an item's keywords all in the answer score 1, half of them 0.5 (at threshold 0.7),
    none 0; the question's score is the mean of its items; abstention 1 when the answer says so."""
    from ragmem.judges.keyword import KeywordJudge
    from ragmem.memory.benchmark import Answered, judge_rubrics
    from ragmem.memory.locomo import QA
    from ragmem.text.keywords import KeywordExtractor

    judge = KeywordJudge(KeywordExtractor(), 0.7)
    three = QA("Order?", "r", (), beam.EVENT_ORDERING, rubric=("LLM response should mention: login page",
                                                               "LLM response should mention: payments api",
                                                               "LLM response should mention: deploy pipeline"))
    cat = QA("Cat?", "none", (), beam.ABSTENTION, abstain=True, rubric=("there is no information related to a cat",))
    cases = [(three, "the login page, the payments api, the deploy pipeline", 1.0),
             (three, "the login page, then the payments, then nothing", (1 + 0.5 + 0) / 3),
             (three, "I do not remember", 0.0),
             (cat, "I don't know: you never mentioned a cat.", 1.0), (cat, "Your cat is Tom.", 0.0)]
    scores = judge_rubrics(judge, [Answered("c", qa, answer, [], 0.0, 0.0) for qa, answer, _ in cases])
    assert scores == pytest.approx([expected for _, _, expected in cases])


def test_kendalls_tau_of_the_event_order_is_concordant_minus_discordant_pairs():
    """Against its definition (no ties: (C - D) / (n (n - 1) / 2)) over random orders of 2-6 events."""
    rng = random.Random(4)
    for _ in range(200):
        n = rng.randint(2, 6)
        events = [{f"event{i}"} for i in range(n)]
        order = rng.sample(range(n), n)  # the answer mentions event order[k] k-th
        tokens = [w for i in order for w in ("then", f"event{i}")]
        position = {e: k for k, e in enumerate(order)}
        pairs = list(itertools.combinations(range(n), 2))
        concordant = sum(position[a] < position[b] for a, b in pairs)
        assert beam.order_tau(tokens, events) == pytest.approx((2 * concordant - len(pairs)) / len(pairs))


def _bench(data, judge: dict, **bench) -> dict:
    from ragmem.run import engine

    return engine.bench_memory({
        "experiment": "beam", "tracking": {"enabled": False}, "seed": 3, "stats": {"resamples": 200},
        "bench": {"dataset": "beam", "data": str(data), "top_k": 5, "methods": ["reference", "no_memory"], **bench},
        "judge": judge}, preflight=False)


def test_an_llm_judge_is_asked_once_an_item_and_the_rerun_asks_nothing(tmp_path):
    from tests.openai_stub import data_block, Stub

    _layout(tmp_path / "beam" / "1", QUESTIONS)

    def judge(request):  # 1 when the item's words are in the answer, 0.5 when some are, else 0
        item, answer = beam.rubric_text(data_block(request, "rubric")).lower(), data_block(request, "answer").lower()
        found = [w in answer for w in item.split()]
        return {"score": "1" if all(found) else "0.5" if any(found) else "0", "reason": "scripted"}

    with Stub(chat=judge) as stub:
        settings = {"type": "llm", "model": "j", "base_url": stub.base_url, "cache_dir": str(tmp_path / "cache"),
                    "retry_backoff_s": 0.01}
        first = _bench(tmp_path / "beam", settings)
        asked = len(stub.requests)
        again = _bench(tmp_path / "beam", settings)
    triples = {tuple(data_block(r, f) for f in ("question", "rubric", "answer")) for r in stub.requests}
    assert len(triples) == asked  # one request an item of an answer; identical ones (the same answer twice) once
    assert {t[1] for t in triples} == {i for qs in QUESTIONS.values() for q in qs for i in q["rubric"]}
    assert len(stub.requests) == asked  # the rerun: every item from the cache
    for a, b in zip(first["methods"], again["methods"]):
        assert a["metrics"]["judge_score"] == b["metrics"]["judge_score"]
    scopes = {(r["method"], r["scope"]): r for r in first["per_category"]}
    assert set(s for _, s in scopes) == {"overall", "information_extraction", "event_ordering", "abstention"}
    assert scopes[("reference", "information_extraction")]["J"] == 1.0  # (its one item, in the recalled turn)
    assert scopes[("reference", "information_extraction")]["evidence_recall"] == 1.0
    assert scopes[("no_memory", "overall")]["J"] < scopes[("reference", "overall")]["J"]


def test_the_two_shared_conversations_offline_give_the_per_ability_table_with_intervals_and_costs():
    """The issue's command in process: --limit-questions 20 over the two 100K conversations, offline,
    the reference memory and the no-memory baseline: every ability a row with its interval, evidence
    recall, tokens per answer and the recall's p95."""
    _needs_shared()
    result = _bench(SHARED, {"type": "keyword", "threshold": 0.7}, limit_questions=20)
    assert result["dataset"] == "beam" and result["n_questions"] == 40 and result["n_conversations"] == 2
    scopes = {(r["method"], r["scope"]): r for r in result["per_category"]}
    abilities = [s for m, s in scopes if m == "reference"]
    assert abilities == ["overall", *[a for a in beam.ABILITIES if a != "abstention"], "abstention"]
    for ability in beam.ABILITIES:
        row = scopes[("reference", ability)]
        assert row["n"] == 4 and row["ci_low"] is not None and row["ci_low"] <= row["J"] <= row["ci_high"]
    assert scopes[("reference", "overall")]["n"] == 40  # abstention counted in the overall, as BEAM's
    assert scopes[("reference", "information_extraction")]["evidence_recall"] > 0
    assert scopes[("no_memory", "information_extraction")]["evidence_recall"] is None  # nothing recalled: undefined
    assert scopes[("reference", "event_ordering")]["order_tau"] is not None
    table = {r["method"]: r for r in result["results_table"]}
    assert table["reference"]["context tokens"] > 0 and table["reference"]["search p95 (s)"] is not None
    assert table["no_memory"]["context tokens"] == 0
    assert result["manifest"]["benchmark"] == "beam" and "ten abilities" in result["manifest"]["question_selection"]


@pytest.mark.parametrize("change, message", [
    (lambda q: q["information_extraction"][0].pop("rubric"), "information_extraction question 1: field 'rubric'"),
    (lambda q: q.update(memory_palace=[]), "unknown ability 'memory_palace'"),
    (lambda q: q["abstention"][0].pop("ideal_response"), "abstention question 1: no reference answer"),
])
def test_a_conversation_not_in_the_layout_names_the_file_and_the_question(tmp_path, change, message):
    questions = json.loads(json.dumps(QUESTIONS))
    change(questions)
    _layout(tmp_path / "c", questions)
    with pytest.raises(DataError, match=message):
        beam.load_beam(tmp_path / "c")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no BEAM conversation below it"):
        beam.load_beam(tmp_path / "empty")


def test_data_fetch_beam_checks_every_pinned_file_and_reads_the_repositorys_layout(tmp_path, monkeypatch):
    """``ragmem data fetch beam --scale 100K`` from a mirror in the authors' layout (the probing questions
    in a folder of their own): the workplace's two conversations match their pinned sha256 and are read
    as fetched; a mirror without the third fails naming it and keeps nothing (the fetch is all or none)."""
    import dataclasses
    import shutil

    from ragmem.data import published
    from ragmem.errors import RagmemError
    from tests.conftest import file_server

    _needs_shared()
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    mirror = tmp_path / "mirror"
    for n in ("1", "2"):
        (mirror / n / "probing_questions").mkdir(parents=True)
        shutil.copy(SHARED / "100K" / n / "chat.json", mirror / n / "chat.json")
        shutil.copy(SHARED / "100K" / n / "probing_questions.json", mirror / n / "probing_questions" / "probing_questions.json")
    spec = published.dataset("beam-100K")
    assert len(spec.files) == 40 and spec.base_url.endswith("/chats/100K")
    with file_server(mirror) as (url, _):
        with pytest.raises(RagmemError, match=r"3/chat.json: cannot be downloaded .*nothing was kept"):
            published.fetch("beam-100K", mirror=url, say=lambda line: None)
        assert not any(published.folder("beam-100K").rglob("*.json"))  # (all or none)
        two = dataclasses.replace(spec, files={f: s for f, s in spec.files.items() if f.split("/")[0] in ("1", "2")})
        monkeypatch.setitem(published.DATASETS, "beam-100K", two)
        folder = published.fetch("beam-100K", mirror=url, say=lambda line: None)  # (the pins of the first two)
    conversations = beam.load_beam(folder)
    assert [c.id for c in conversations] == ["1", "2"] and [len(c.qa) for c in conversations] == [20, 20]
    assert published.BEAM_SCALES["128K"] == "100K"
