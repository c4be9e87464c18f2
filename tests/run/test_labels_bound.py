"""A label judges the answer it was written for: with a live agent whose answers differ from the
recorded ones, the labels are set aside (counted, one line, kappa null); with the recorded answers
(replay) they are used as before; a label sheet binds its labels to the answers it showed.

Oracle: scikit-learn's ``cohen_kappa_score`` on exactly the examples whose answer is the labelled one.
"""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

import ragmem
from ragmem.data.loaders import parse_record
from ragmem.judges import labels
from ragmem.schema import answer_digest

DEMO = "ragmem/datasets/demo_bilingual.json"


@pytest.fixture
def agents(tmp_path, monkeypatch):
    """Two agents: one that answers something else every time, one that gives the recorded answer
    to the even-numbered records and something else to the others."""
    records = json.loads(open(DEMO, encoding="utf-8").read())
    recorded = {r["query"]: r["generated_answer"] for r in records[::2]}
    (tmp_path / "bound_agents.py").write_text(
        "import json\n"
        f"RECORDED = json.loads({json.dumps(json.dumps(recorded, ensure_ascii=False))})\n"
        "def other(query, **kw):\n    return {'answer': 'an answer nobody labelled', 'contexts': []}\n"
        "def half(query, **kw):\n    return {'answer': RECORDED.get(query, 'an answer nobody labelled'), 'contexts': []}\n",
        encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("bound_agents", None)


def _kappa_of(table: pd.DataFrame) -> float:
    kept = table[table["label"].notna() & table["verdict"].notna()]
    return cohen_kappa_score(kept["label"].astype(int), kept["verdict"].astype(int))


def test_a_live_agents_other_answers_set_the_labels_aside_and_kappa_is_null(agents, capsys):
    live = ragmem.evaluate(DEMO, track=False, agent={"type": "python", "target": "bound_agents:other"})
    assert live.metrics["judge_label_kappa"] is None and live.metrics["n_labelled"] == 0
    assert live.summary["counts"]["n_labels_set_aside"] == 36 and live.summary["judge_unreliable"] is None
    assert live.metrics.get("pass_rate_ppi") is None and live.metrics["accuracy"] is None
    lines = [n for n in live.summary["notes"] if n.startswith("labels: 36 labels set aside")]
    assert len(lines) == 1
    assert live.table["label"].isna().all() and live.table["label_set_aside"].notna().all()


def test_replayed_answers_keep_every_label_and_the_kappa_of_today():
    replay = ragmem.evaluate(DEMO, track=False)
    assert "n_labels_set_aside" not in replay.summary["counts"] and replay.metrics["n_labelled"] == 36
    assert replay.metrics["judge_label_kappa"] == pytest.approx(_kappa_of(replay.table), abs=1e-12)
    assert not [n for n in replay.summary["notes"] if n.startswith("labels:")]


def test_only_the_labels_of_the_answers_they_judged_are_compared(agents):
    half = ragmem.evaluate(DEMO, track=False, agent={"type": "python", "target": "bound_agents:half"})
    assert half.summary["counts"]["n_labels_set_aside"] == 18 and half.metrics["n_labelled"] == 18
    assert half.metrics["judge_label_kappa"] == pytest.approx(_kappa_of(half.table), abs=1e-12)
    assert any(n.startswith("labels: 18 labels set aside") for n in half.summary["notes"])


def test_a_record_may_name_the_answer_its_label_judged_and_a_bad_digest_is_one_line():
    raw = {"id": "q1", "query": "q", "reference_answer": "Paris", "label": 1}
    example, problems = parse_record({**raw, "label_answer_sha256": answer_digest("Paris").upper()}, "d.jsonl", 1,
                                     require_answer=False)
    assert not problems and example.label_answer == answer_digest("Paris")
    example, _ = parse_record({**raw, "generated_answer": "Lyon"}, "d.jsonl", 1)
    assert example.label_answer == answer_digest("Lyon")  # the recorded answer is the one judged
    example, _ = parse_record(raw, "d.jsonl", 1, require_answer=False)
    assert example.label_answer is None  # names no answer: compared with whatever comes, and said so
    _, problems = parse_record({**raw, "label_answer_sha256": "abc"}, "d.jsonl", 4, require_answer=False)
    assert problems[0].field == "label_answer_sha256" and problems[0].record == 4


def test_a_label_sheet_binds_its_labels_to_the_answers_it_showed():
    table = pd.DataFrame({"id": ["a", "b", "c"], "generated_answer": ["Paris", "Lyon", None],
                          "label": pd.array([None, None, None], dtype="Int64")})
    sheet = {"a": "Paris\r\n", "b": "Marseille", "c": ""}  # (a spreadsheet's line end; c: the call failed)
    out = labels.attach(table, {"a": 1, "b": 0, "c": 1}, sheet)
    assert out["label"].tolist()[0] == 1 and pd.isna(out["label"].tolist()[1]) and out["label"].tolist()[2] == 1
    assert out["label_set_aside"].tolist()[1] == 0 and out["label_set_aside"].isna().sum() == 2
    assert labels.attach(table, {"a": 1})["label"].tolist()[0] == 1  # a sheet without answers: as before
