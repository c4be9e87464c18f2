"""The Python API runs the same pipeline without Prefect, with or without MLflow."""

import json
import os

import pytest
from mlflow import MlflowClient

import ragmem

DEMO = "ragmem/datasets/demo_bilingual.json"


@pytest.fixture
def store(tmp_path, monkeypatch, shared_store):
    monkeypatch.chdir(tmp_path)
    return shared_store


def test_evaluate_without_tracking():
    from tests.conftest import ROOT

    result = ragmem.evaluate(str(ROOT / DEMO), track=False)
    assert result.run_id is None and len(result.table) == 36
    assert {"accuracy", "precision", "recall", "f1", "avg_coverage", "reference_coverage"} <= set(result.metrics)
    assert result.metrics["avg_latency"] is None  # the demo data records no latency: not measured
    assert set(result.table["verdict"].dropna().unique()) <= {0, 1}


def test_overrides_and_tracking_round_trip(store):
    from tests.conftest import ROOT

    result = ragmem.evaluate(str(ROOT / DEMO), experiment="api-test", judge={"threshold": 0.5},
                             tracking=store, metrics=["f1", "avg_coverage"])
    # the selection, plus pass_rate (always computed: the system's quality as judged, labels or not)
    # and the judge's reliability (measured on every run: with labels, its kappa; the keyword judge's
    # threshold moved by 0.1), and the keyword cache's hit rate (usage, as the judge's calls are)
    assert {k for k in result.metrics if not k.startswith(("confusion_", "n_", "judge_", "keywords_"))} == \
        {"pass_rate", "f1", "avg_coverage"}
    assert 0 < result.metrics["keywords_cache_hit_rate"] < 1
    assert {"judge_label_kappa", "judge_threshold_low_pass_rate", "judge_threshold_high_pass_rate"} <= set(result.metrics)
    assert list(result.metrics)[0] == "pass_rate" and result.summary["ci"]["pass_rate"] is not None
    # where the run is stored, by the database file's absolute path (the run's last line says it too)
    assert result.summary["tracking_uri"] == store["uri"] and store["uri"].startswith("sqlite:////")
    run = MlflowClient(store["uri"]).get_run(result.run_id)
    assert run.info.status == "FINISHED"
    assert "MLFLOW_TRACKING_URI" not in os.environ  # the run's store does not leak into the environment
    assert run.data.params["judge.threshold"] == "0.5"
    # its name says what it was started from and what was changed (not one MLflow made up)
    assert run.info.run_name == "python-api judge.threshold=0.5 metrics=f1,avg_coverage data=demo_bilingual.json"
    from ragmem.config import secrets
    from ragmem.run.prepare import default_run_name

    secrets.remember({"agent": {"params": {"options": {"accessToken": "tok-9f3c2"}}}})  # a secret inside a value
    assert default_run_name("c.yaml", ["agent.params.options={accessToken: tok-9f3c2}"], None) == \
        "c agent.params.options={accessToken: ***}"
    assert run.data.metrics["f1"] == pytest.approx(result.metrics["f1"])
    artifacts = {a.path for a in MlflowClient(store["uri"]).list_artifacts(result.run_id)}
    assert {"config.json", "summary.json", "examples.csv", "examples.json", "plots"} <= artifacts


def test_python_agent_through_the_api(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps({"query": q, "reference_answer": q, "label": 1})
                              for q in ["向量检索", "fail now", "BM25 ranking"]), encoding="utf-8")
    result = ragmem.evaluate(str(data), track=False,
                             agent={"type": "python", "target": "tests.sample_agents:sometimes_fails",
                                    "retry_backoff_s": 0.01})
    assert result.summary["n_errors"] == 1
    assert result.table.loc[1, "error"] == "RuntimeError: backend unavailable"
    assert result.metrics["n_classified"] == 2 and result.metrics["recall"] == 1.0
    assert result.metrics["n_latency_measured"] == 3  # the failed call was timed too


def test_live_calls_are_traced_in_mlflow(store, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps({"query": q, "reference_answer": q}) for q in ["a", "b", "c"]))
    result = ragmem.evaluate(str(data), agent={"type": "python", "target": "tests.sample_agents:echo"},
                             tracking={**store, "max_traces": 2}, metrics=["avg_latency"])
    client = MlflowClient(store["uri"])
    run = client.get_run(result.run_id)
    assert run.data.metrics["count/n_traces"] == 2
    traces = client.search_traces(locations=[run.info.experiment_id], run_id=result.run_id)
    assert len(traces) == 2
    assert sorted(s.name for s in traces[0].data.spans) == ["agent", "llm", "retrieve"]


def test_pass_rate_needs_no_labels_and_comes_first(tmp_path, capsys):
    from ragmem.report.terminal import print_summary

    data = tmp_path / "unlabelled.json"
    data.write_text(json.dumps([{"query": f"q{i}", "reference_answer": "the cat is named Miso",
                                 "generated_answer": "the cat is named Miso" if i < 3 else "no idea"} for i in range(4)]))
    result = ragmem.evaluate(str(data), track=False, metrics=["accuracy", "f1", "avg_coverage"])
    assert list(result.metrics)[0] == "pass_rate" and result.metrics["pass_rate"] == 0.75
    assert result.metrics["n_judged"] == 4 and result.metrics["accuracy"] is None
    low, high = result.summary["ci"]["pass_rate"]
    assert 0 <= low <= 0.75 <= high <= 1
    print_summary(result.summary)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("│")]
    assert rows[0].split("│")[1].strip() == "pass_rate (keyword)"  # the first line of the table (the keyword judge's)
    assert not any(r.split("│")[1].strip() in ("accuracy", "f1") for r in rows)  # no labels: not shown


def test_a_judge_at_chance_is_flagged_in_the_summary_and_the_mlflow_run(store, tmp_path):
    """Every answer matches its reference, so the keyword judge passes all; half the labels say
    wrong: kappa 0, whose interval stays below judge.min_kappa (0.4): one line, a tag."""
    records = [{"id": f"q{i}", "query": f"question {i}", "reference_answer": f"answer number {i} is blue",
                "generated_answer": f"answer number {i} is blue", "label": i % 2} for i in range(12)]
    data = tmp_path / "chance.json"
    data.write_text(json.dumps(records))
    result = ragmem.evaluate(str(data), experiment="api-test", tracking=store, metrics=["f1"])
    assert result.metrics["pass_rate"] == 1.0 and result.metrics["judge_label_kappa"] == 0.0
    assert result.summary["judge_unreliable"].startswith("judge unreliable: Cohen kappa with the labels 0.000")
    run = MlflowClient(store["uri"]).get_run(result.run_id)
    assert run.data.tags["ragmem.judge.unreliable"] == "true"
    assert run.data.metrics["judge/label_kappa"] == 0.0 and run.data.metrics["count/n_labelled"] == 12
    assert "judge/label_kappa_ci_high" in run.data.metrics
    calm = ragmem.evaluate(str(data), experiment="api-test", tracking=store, metrics=["f1"], judge={"min_kappa": -0.5})
    assert calm.summary["judge_unreliable"] is None
    assert "ragmem.judge.unreliable" not in MlflowClient(store["uri"]).get_run(calm.run_id).data.tags


def test_an_untracked_run_leaves_no_journal_unless_asked(tmp_path, monkeypatch):
    from tests.conftest import ROOT

    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    ragmem.evaluate(str(ROOT / DEMO), track=False, metrics=["f1"])
    assert not list((tmp_path / "home" / "runs").glob("*")) if (tmp_path / "home" / "runs").exists() else True
    ragmem.evaluate(str(ROOT / DEMO), track=False, metrics=["f1"], journal=True)
    kept = list((tmp_path / "home" / "runs").glob("untracked-*/agent_outputs.jsonl"))
    assert len(kept) == 1 and len(kept[0].read_text(encoding="utf-8").splitlines()) == 36
