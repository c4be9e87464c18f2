"""Human labels: the sheet drawn with ``judge.label_sample`` (stratified by the judge's verdict), and
``ragmem labels import RUN CSV``, which attaches them to the run and recomputes what rests on them,
or refuses bad input in one line (exit 2) with nothing attached."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

import ragmem
from ragmem.errors import ConfigError
from ragmem.judges import labels

DEMO = "ragmem/datasets/demo_bilingual.json"


def test_the_sheet_is_drawn_among_judged_unlabelled_examples_stratified_by_verdict():
    table = pd.DataFrame({"id": [f"e{i}" for i in range(100)], "verdict": [1] * 90 + [0] * 10,
                          "label": [None] * 95 + [1] * 5, "error": [None] * 99 + ["boom"],
                          "query": "q", "generated_answer": "a", "reference_answer": "r", "judge_reason": "why"})
    rows = labels.pick(table, 10, seed=3)
    assert len(rows) == 10 and list(rows.columns) == list(labels.COLUMNS)
    assert sorted(rows["judge_verdict"]) == [0] + [1] * 9  # 90:5 judged unlabelled: 9 and 1
    assert not set(rows["example_id"]) & {f"e{i}" for i in range(95, 100)}  # labelled or failed: never
    assert rows["example_id"].tolist() == labels.pick(table, 10, seed=3)["example_id"].tolist()  # seeded
    assert len(labels.pick(table, 500)) == 95


def _sheet(path, rows, columns=("example_id", "label")):
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows(rows)
    return path


def test_a_bad_sheet_is_one_line_naming_the_file_row_and_field(tmp_path):
    known = {"a", "b"}
    with pytest.raises(ConfigError, match=r"sheet.csv: missing column 'label'"):
        labels.read_sheet(_sheet(tmp_path / "sheet.csv", [["a"]], ("example_id",)), known, "run1")
    with pytest.raises(ConfigError, match=r"sheet.csv: row 3, field example_id: 'zz' is not an example of run run1"):
        labels.read_sheet(_sheet(tmp_path / "sheet.csv", [["a", "1"], ["zz", "0"]]), known, "run1")
    with pytest.raises(ConfigError, match=r"sheet.csv: row 2 \(example a\), field label: expected 0 or 1, got 'yes'"):
        labels.read_sheet(_sheet(tmp_path / "sheet.csv", [["a", "yes"]]), known, "run1")
    with pytest.raises(ConfigError, match=r"row 3 \(example a\), field label: 0 contradicts 1"):
        labels.read_sheet(_sheet(tmp_path / "sheet.csv", [["a", "1"], ["a", "0"]]), known, "run1")
    with pytest.raises(ConfigError, match="no row has a label"):
        labels.read_sheet(_sheet(tmp_path / "sheet.csv", [["a", ""]]), known, "run1")
    assert labels.read_sheet(_sheet(tmp_path / "sheet.csv", [["a", "1"], ["b", ""]]), known, "run1") == ({"a": 1}, 1)


@pytest.fixture
def unlabelled_run(tmp_path, monkeypatch, shared_store):
    """The demo without its labels, run with judge.label_sample 12; its true labels kept aside."""
    from tests.conftest import ROOT

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    records = json.loads((ROOT / DEMO).read_text(encoding="utf-8"))
    truth = {r["id"]: r.pop("label") for r in records}
    data = tmp_path / "unlabelled.json"
    data.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    result = ragmem.evaluate(str(data), experiment="labels-test", tracking=shared_store,
                             judge={"label_sample": 12}, metrics=["answer_correctness", "f1"])
    sheet = tmp_path / "home" / "runs" / result.run_id / labels.SHEET
    return result, sheet, truth, shared_store["uri"]


def test_labels_drawn_filled_and_imported_give_the_prediction_powered_pass_rate(unlabelled_run, ragmem_main, tmp_path):
    result, sheet, truth, uri = unlabelled_run
    assert result.metrics.get("pass_rate_ppi") is None and result.metrics.get("judge_label_kappa") is None
    assert any(n.startswith("labels: 12 examples to label in ") and f"ragmem labels import {result.run_id[:8]}" in n
               for n in result.summary["notes"])
    rows = list(csv.DictReader(open(sheet, encoding="utf-8-sig")))
    assert len(rows) == 12 and {r["judge_verdict"] for r in rows} == {"0", "1"} and all(r["label"] == "" for r in rows)
    for row in rows:
        row["label"] = truth[row["example_id"]]
    filled = tmp_path / "filled.csv"
    with open(filled, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    ran = ragmem_main(["labels", "import", result.run_id[:8], str(filled), "--tracking-uri", uri])
    assert ran.returncode == 0, ran.stderr
    assert f"labels: 12 labels from {filled} attached to run {result.run_id}" in ran.stdout
    run = MlflowClient(uri).get_run(result.run_id)
    m = run.data.metrics
    assert m["count/n_labelled"] == 12 and "judge/label_kappa" in m and "pass_rate_ppi_ci_high" in m
    labelled = [r for r in rows]
    judged = result.table.set_index("id")["verdict"].astype(float)
    from ragmem.metrics.estimators import pass_rate_ppi, ppi_mean_ci, ppi_statistics

    unlabelled = [judged[i] for i in judged.index if i not in {r["example_id"] for r in labelled}]
    ys, fs = [float(r["label"]) for r in labelled], [judged[r["example_id"]] for r in labelled]
    expected = ppi_mean_ci(ys, fs, unlabelled)
    assert m["pass_rate_ppi"] == pytest.approx(expected.estimate, abs=1e-12)
    mask = np.r_[[True] * len(ys), [False] * len(unlabelled)]  # the run's interval: the small-sample one
    ppi = pass_rate_ppi(ppi_statistics(np.r_[ys, np.zeros(len(unlabelled))], np.r_[fs, unlabelled], mask, ~mask).sum(axis=0))
    assert (m["pass_rate_ppi_ci_low"], m["pass_rate_ppi_ci_high"]) == pytest.approx((ppi.low, ppi.high), abs=1e-12)
    assert m["answer_correctness_ppi"] == m["pass_rate_ppi"]
    traces = MlflowClient(uri).search_traces(locations=[run.info.experiment_id], run_id=result.run_id, max_results=100)
    human = [a for t in traces for a in t.info.assessments or () if a.name == "human_label"]
    assert len(human) == 12 and {a.source.source_type for a in human} == {"HUMAN"}
    again = ragmem_main(["labels", "import", result.run_id[:8], str(filled), "--tracking-uri", uri])
    assert again.returncode == 0
    traces = MlflowClient(uri).search_traces(locations=[run.info.experiment_id], run_id=result.run_id, max_results=100)
    assert len([a for t in traces for a in t.info.assessments or () if a.name == "human_label"]) == 12  # none twice


#: (case, run reference or None for the run's own, columns, rows, expected error); the good rows are
#: zh-01 labelled 1 and zh-02 labelled 0
_BAD_IMPORTS = [
    ("run", "0000ffff", ("example_id", "label"), [["zh-01", "1"], ["zh-02", "0"]],
     "run '0000ffff': no run id starts with it in the tracking store"),
    ("column", None, ("example_id", "verdict"), [["zh-01", "1"], ["zh-02", "0"]], "missing column 'label'"),
    ("example", None, ("example_id", "label"), [["zh-01", "1"], ["zh-02", "0"], ["nope", "1"]],
     "row 4, field example_id: 'nope' is not an example of run"),
    ("verdict", None, ("example_id", "label"), [["zh-01", "2"]],
     "row 2 (example zh-01), field label: expected 0 or 1, got '2'"),
]


def test_a_bad_import_is_one_line_exit_2_and_attaches_nothing(unlabelled_run, ragmem_main, tmp_path):
    """Every bad sheet against one run (each is refused before anything is written, so the run is the
    same for the next case)."""
    result, sheet, truth, uri = unlabelled_run
    for case, run_ref, columns, rows, expected in _BAD_IMPORTS:
        ran = ragmem_main(["labels", "import", run_ref or result.run_id[:8],
                           str(_sheet(tmp_path / f"bad-{case}.csv", rows, columns)), "--tracking-uri", uri])
        assert ran.returncode == 2, case
        lines = [line for line in ran.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], (case, ran.stderr)
        assert "Traceback" not in ran.stderr + ran.stdout, case
        run = MlflowClient(uri).get_run(result.run_id)
        assert "count/n_labelled" not in run.data.metrics, case
        assert "labels" not in [a.path for a in MlflowClient(uri).list_artifacts(result.run_id)], case


def test_a_sheet_excel_saved_as_gbk_is_read_with_its_encoding(tmp_path):
    """A Chinese sheet saved by Excel is often GBK: without --encoding, one line says where it stops
    being UTF-8 and how to read it; with it, the labels are read."""
    path = tmp_path / "sheet.csv"
    path.write_bytes("example_id,label,query\na,1,数据集有多少条样本？\nb,0,评估结果发给谁？\n".encode("gb18030"))
    with pytest.raises(ConfigError) as refused:
        labels.read_sheet(path, {"a", "b"}, "run1")
    assert str(refused.value) == (f"{path}: not UTF-8 text (line 2: byte 0xca at offset 27); if it is in another "
                                  f"encoding (a Chinese file saved by Excel is often GBK), give --encoding gb18030")
    assert labels.read_sheet(path, {"a", "b"}, "run1", encoding="gb18030") == ({"a": 1, "b": 0}, 0)
    with pytest.raises(ConfigError, match="--encoding: unknown text encoding 'klingon'"):
        labels.read_sheet(path, {"a", "b"}, "run1", encoding="klingon")
