"""What a run leaves for MLflow's own views: the Dataset and Source columns, params without nulls,
counts apart from scores, the experiment opening on its runs, and assessments on the traces."""

from __future__ import annotations

import json
import subprocess

import pytest
from mlflow import MlflowClient

import ragmem


@pytest.fixture(scope="module")
def run(tmp_path_factory, shared_store):
    """One tracked run for the module's tests (they only read it), from a git checkout of its own,
    whose commit the run's source tags must name."""
    folder = tmp_path_factory.mktemp("views")
    for command in (["init", "-q"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(["git", "-C", str(folder), *command], check=True, capture_output=True)
    head = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    data = folder / "views.jsonl"
    data.write_text("\n".join(json.dumps({"id": f"q{i}", "query": f"Where is site {i}?",
                                          "reference_answer": f"Where is site {i}?", "label": i % 2})
                              for i in range(4)) + "\n")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(folder)
        result = ragmem.evaluate(str(data), agent={"type": "python", "target": "tests.sample_agents:echo"},
                                 experiment="mlflow-views", tracking={**shared_store, "max_traces": 3})
    client = MlflowClient(shared_store["uri"])
    return result, client, client.get_run(result.run_id), head


def test_the_dataset_is_the_runs_input_with_its_digest_source_and_schema(run):
    result, _, logged, _ = run
    [entry] = logged.inputs.dataset_inputs
    dataset = entry.dataset
    sha = result.params["data.sha256"]
    assert dataset.name == "views" and dataset.digest == sha[:36] and sha.startswith(dataset.digest)
    assert json.loads(dataset.source)["uri"].endswith("views.jsonl") and dataset.source_type == "local"
    columns = {c["name"]: c for c in json.loads(dataset.schema)["mlflow_colspec"]}
    assert set(columns) == {"id", "query", "reference_answer", "label"} and columns["label"]["type"] == "long"
    assert json.loads(dataset.profile) == {"num_rows": 4, "files": 1, "sha256": sha}
    assert [(t.key, t.value) for t in entry.tags] == [("mlflow.data.context", "evaluation")]


def test_source_tags_params_without_nulls_and_counts_apart(run):
    _, client, logged, head = run
    tags = logged.data.tags
    assert tags["mlflow.source.type"] == "LOCAL" and tags["mlflow.source.name"]
    assert tags["mlflow.source.git.commit"] == head
    params = logged.data.params
    assert not [k for k, v in params.items() if v in ("null", "None", "[]", "{}")]
    assert "agent.target" in params and "agent.url" not in params and "corpus.path" not in params
    assert not [k for k in params if "." not in k and k not in ("seed", "metrics", "zero_division")]
    metrics = logged.data.metrics
    assert "pass_rate" in metrics and "latency_p95" in metrics
    assert metrics["count/n_examples"] == 4 and metrics["count/n_traces"] == 3
    assert not [k for k in metrics if "/" not in k and (k.startswith(("n_", "undefined_", "confusion_")) or k.endswith("_errors"))]
    experiment = client.get_experiment(logged.info.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"  # opens on the runs


def test_each_trace_carries_the_verdict_and_scores_of_its_example(run):
    result, client, logged, _ = run
    traces = client.search_traces(locations=[logged.info.experiment_id], run_id=result.run_id)
    assert len(traces) == 3
    table = result.table.set_index("id")
    for trace in traces:
        example = trace.info.tags["ragmem.example_id"]
        found = {a.name: a for a in trace.info.assessments}
        assert {"verdict", "reference_coverage"} <= set(found)
        assert found["verdict"].feedback.value == int(table.loc[example, "verdict"])
        assert found["verdict"].rationale == table.loc[example, "judge_reason"]
        assert found["verdict"].source.source_id == "ragmem keyword judge"
        assert found["reference_coverage"].feedback.value == pytest.approx(table.loc[example, "reference_coverage"])
