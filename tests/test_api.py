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
    assert {k for k in result.metrics if not k.startswith(("confusion_", "n_"))} == {"f1", "avg_coverage"}
    run = MlflowClient(store["uri"]).get_run(result.run_id)
    assert run.info.status == "FINISHED"
    assert "MLFLOW_TRACKING_URI" not in os.environ  # the run's store does not leak into the environment
    assert run.data.params["judge.threshold"] == "0.5"
    assert run.data.metrics["f1"] == pytest.approx(result.metrics["f1"])
    artifacts = {a.path for a in MlflowClient(store["uri"]).list_artifacts(result.run_id)}
    assert {"config.json", "summary.json", "examples.csv", "examples.json", "plots"} <= artifacts


def test_python_agent_through_the_api(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps({"query": q, "reference_answer": q, "label": 1})
                              for q in ["向量检索", "fail now", "BM25 ranking"]), encoding="utf-8")
    result = ragmem.evaluate(str(data), track=False,
                             agent={"type": "python", "target": "tests.sample_agents:sometimes_fails"})
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
    assert run.data.metrics["n_traces"] == 2
    traces = client.search_traces(locations=[run.info.experiment_id], run_id=result.run_id)
    assert len(traces) == 2
    assert sorted(s.name for s in traces[0].data.spans) == ["agent", "llm", "retrieve"]
