"""Production traffic as data (``data.traces``): 200 traces written with MLflow's tracing API (a
retriever and a memory span each, two sessions, five that raised) evaluated by ``ragmem run
configs/traces.yaml``: 200 examples, the five failed agent calls named by trace id, contexts that
are the retriever spans' documents, latencies that are the spans' durations, the verdict and scores
written back onto every judged trace as assessments, and a second run that updates them, adding
none. And an OTLP JSON file of the same spans, from the OpenTelemetry SDK, gives the same per-example
table."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
from mlflow import MlflowClient
from mlflow.tracing.client import TracingClient

import ragmem
from ragmem.tracking.runs import run_table
from tests import traffic
from tests.conftest import mlflow_server, ROOT, run_cli

pytestmark = pytest.mark.e2e

ASSESSED = {"faithfulness", "answer_relevancy", "context_relevance", "coverage"}


def _assessments(uri: str, ids: list[str]) -> dict[str, list]:
    client = TracingClient(uri)
    return {i: list(client.get_trace(i).info.assessments or ()) for i in ids}


def check_traces_run(uri: str, env: dict[str, str], folder, n: int = 200) -> None:
    """The whole check against the tracking store at ``uri`` (a sqlite file, or an mlflow server)."""
    planned = traffic.plan(n, raised=5)
    ids = traffic.write_mlflow(uri, "prod-demo", planned)
    args = ["run", str(ROOT / "configs" / "traces.yaml"), "--set", f"data.traces.tracking_uri={uri}",
            "--set", f"tracking.uri={uri}", "-o", str(folder / "s.json")]
    done = run_cli(args, env=env, cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((folder / "s.json").read_text())
    assert summary["n_examples"] == n and summary["counts"]["n_agent_errors"] == 5
    failed = [i for p, i in zip(planned, ids) if p.raised]
    named = next(note for note in summary["notes"] if note.startswith("5 traces failed"))
    assert all(f"{i}: the trace ended in error: RuntimeError: the agent broke on question" in named for i in failed)
    assert summary["params"]["data.traces.until"]  # the window, fixed and logged
    assert (summary["clusters"]["by"], summary["clusters"]["n"]) == ("session_id", 2)  # sessions resampled
    # a session's traces are turns of a conversation: each holds its earlier ones (data.traces.history: 10)
    assert any(f"{n - 2} examples are turns of a conversation (history): knowledge_retention, earlier_turn_recall added"
               in note for note in summary["notes"])
    assert summary["coverage"]["knowledge_retention"] == {"scored": n - 2 - 5 + sum(p.raised for p in planned[:2]),
                                                          "of": n}

    table = run_table(MlflowClient(uri), summary["run_id"])
    table = (table if isinstance(table, pd.DataFrame) else table.frame()).set_index("trace_id")
    client = TracingClient(uri)
    for p, trace_id in zip(planned, ids):
        row = table.loc[trace_id]
        trace = client.get_trace(trace_id)
        root = next(s for s in trace.data.spans if s.parent_id is None)
        assert abs(row["latency_s"] * 1000 - (root.end_time_ns - root.start_time_ns) / 1e6) < 1
        if p.raised:
            assert row["error"].startswith("the trace ended in error")
            continue
        retriever = next(s for s in trace.data.spans if s.span_type == "RETRIEVER")
        contexts = json.loads(row["contexts"]) if isinstance(row["contexts"], str) else row["contexts"]
        rag = [(c["id"], c["text"]) for c in contexts if c["source"] == "rag"]
        assert rag == [(d["id"], d["page_content"]) for d in retriever.outputs]
        assert abs(row["stage_retrieve_s"] * 1000 - (retriever.end_time_ns - retriever.start_time_ns) / 1e6) < 1
        assert row["session_id"] == p.session and row["tokens_input"] == 40 + p.index
        history = json.loads(row["history"]) if isinstance(row["history"], str) else (
            row["history"] if isinstance(row["history"], list) else [])  # (the first turns: none)
        earlier = [q for q in planned[:p.index] if q.session == p.session][-10:]
        assert [t["content"] for t in history if t["role"] == "user"] == [q.query for q in earlier]
    first = _assessments(uri, ids)
    judged = [i for p, i in zip(planned, ids) if not p.raised]
    assert all(ASSESSED <= {a.name for a in first[i]} for i in judged)
    assert all("knowledge_retention" in {a.name for a in first[i]} for i in judged[2:])  # (the first turns: none)
    assert all(first[i] == [] for i in failed)
    one = next(a for a in first[judged[0]] if a.name == "faithfulness")
    assert one.metadata["ragmem.run_id"] == summary["run_id"] and one.metadata["ragmem.prompt_version"]

    again = run_cli(args, env=env, cwd=folder)
    assert again.returncode == 0, again.stderr[-3000:]
    second_run = json.loads((folder / "s.json").read_text())["run_id"]
    second = _assessments(uri, ids)
    assert {i: sorted(a.assessment_id for a in v) for i, v in second.items()} == \
        {i: sorted(a.assessment_id for a in v) for i, v in first.items()}  # updated, none added
    assert {a.metadata["ragmem.run_id"] for v in second.values() for a in v} == {second_run}


def test_two_hundred_mlflow_traces_judged_and_assessed_in_place(prefect_env, tmp_path):
    check_traces_run(f"sqlite:///{tmp_path / 'app.db'}", {**prefect_env, "RAGMEM_HOME": str(tmp_path / "home")},
                     tmp_path)


def test_an_otlp_file_gives_the_same_table_as_the_same_spans_in_mlflow(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    planned = traffic.plan(30, raised=3)
    uri = f"sqlite:///{tmp_path / 'app.db'}"
    traffic.write_mlflow(uri, "prod-demo", planned)
    path = traffic.write_otlp(tmp_path / "spans.json", planned)
    settings = {"judge": {"type": "keyword"}, "stats": {"resamples": 200}}
    from_mlflow = ragmem.evaluate(config={**settings, "data": {"traces": {"experiment": "prod-demo", "tracking_uri": uri,
                                                                          "since": "7d"}}}, track=False)
    from_file = ragmem.evaluate(config={**settings, "data": {"traces": {"files": [str(path)]}}}, track=False)
    drop = ["id", "trace_id", "source_file"]
    a, b = from_mlflow.table.drop(columns=drop), from_file.table.drop(columns=drop)
    assert len(a) == 30 and list(a.columns) == list(b.columns)
    pd.testing.assert_frame_equal(a, b)
    assert from_mlflow.metrics == from_file.metrics
    assert "MLFLOW_TRACKING_URI" not in os.environ  # the application's store did not leak into this process


@pytest.mark.stress  # (its own lane: a real mlflow server, started for this test)
def test_the_same_against_a_real_mlflow_server_over_http(prefect_env, tmp_path):
    with mlflow_server(tmp_path) as (url, _):
        check_traces_run(url, {**prefect_env, "RAGMEM_HOME": str(tmp_path / "home")}, tmp_path)


def test_the_worked_example_the_traced_reference_agent_then_configs_traces(prefect_env, tmp_path):
    """docs/traffic.md's walk-through: the traced app answers into prod-demo in the home's store, and
    ``ragmem run configs/traces.yaml`` (nothing set) evaluates it."""
    env = {**prefect_env, "RAGMEM_HOME": str(tmp_path / ".ragmem"), "PYTHONPATH": str(ROOT)}
    app = subprocess.run([sys.executable, str(ROOT / "examples" / "prod_traffic" / "app.py"), "--n", "24",
                          "--fail-every", "8"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert app.returncode == 0, app.stderr[-2000:]
    assert app.stdout.startswith("24 traces written to experiment 'prod-demo'") and "(3 raised)" in app.stdout
    done = run_cli(["run", str(ROOT / "configs" / "traces.yaml"), "-o", "s.json"], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["n_examples"] == 24 and summary["counts"]["n_agent_errors"] == 3
    assert summary["metrics"]["faithfulness"] is not None and summary["metrics"]["retrieve_latency_p95"] is not None
    assert summary["metrics"]["context_share_memory_long"] > 0  # the memory spans' recalls, by source
    assert any("judge.type llm judges an answer without one" in note for note in summary["notes"])


def test_a_rerun_over_the_same_traces_is_paired_never_two_independent_windows(tmp_path, monkeypatch):
    """The same traces config run twice (not incremental): the second run's comparison with the first
    pairs the traces both evaluated (a rerun is not a new window), and says so."""
    uri = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    traffic.write_mlflow(uri, "prod-demo", traffic.plan(40, raised=0))
    config = {"experiment": "prod-demo-eval", "data": {"traces": {"experiment": "prod-demo", "tracking_uri": uri,
                                                                  "since": "24h"}},
              "tracking": {"uri": f"sqlite:///{tmp_path / 'eval.db'}", "max_traces": 0}, "stats": {"resamples": 200}}
    first = ragmem.evaluate(config=config)
    second = ragmem.evaluate(config=config)
    previous = second.summary["traces"]["previous"]
    assert previous["run_id"] == first.run_id and previous["paired"] == 40
    assert previous["test"] == "paired bootstrap (the 40 traces both runs evaluated)"
    row = next(r for r in previous["rows"] if r["diff"] is not None)
    assert row["n_shared"] == 40 and row["diff"] == pytest.approx(0.0, abs=1e-12)  # the same traces, the same judge
    assert "n_a" not in row


def test_two_judges_keep_their_own_assessments_on_each_trace(tmp_path, monkeypatch):
    """Two runs by two judges over the same 20 MLflow traces leave both judges' assessments on each
    trace, each with its run id and signature; a third run by the first judge updates its own and adds
    none; a metric of one's own is written back on every trace too."""
    uri = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    ids = traffic.write_mlflow(uri, "prod-demo", traffic.plan(20, raised=0))

    def short(answer):  # a metric of one's own
        return len(answer) < 45

    def run(threshold: float):
        return ragmem.evaluate(config={"experiment": "two-judges", "judge": {"type": "keyword", "threshold": threshold},
                                       "data": {"traces": {"experiment": "prod-demo", "tracking_uri": uri, "since": "7d"}},
                                       "tracking": {"uri": f"sqlite:///{tmp_path / 'eval.db'}", "max_traces": 0},
                                       "stats": {"resamples": 100}, "metrics": {"custom": [short]}})

    a, b = run(0.7), run(0.3)
    signatures = {a.params["judge.signature"], b.params["judge.signature"]}
    assert len(signatures) == 2
    by_trace = _assessments(uri, ids)
    for trace_id in ids:
        found = by_trace[trace_id]
        faithful = [x for x in found if x.name == "faithfulness"]
        assert {(x.metadata["ragmem.run_id"], x.metadata["ragmem.judge.signature"]) for x in faithful} == \
            {(a.run_id, a.params["judge.signature"]), (b.run_id, b.params["judge.signature"])}
        assert all(x.metadata["ragmem.version"] and x.metadata["ragmem.prompt_version"] for x in found)
        assert {x.metadata["ragmem.run_id"] for x in found if x.name == "short"} == {a.run_id, b.run_id}
    again = run(0.7)
    after = _assessments(uri, ids)
    assert {i: sorted(x.assessment_id for x in v) for i, v in after.items()} == \
        {i: sorted(x.assessment_id for x in v) for i, v in by_trace.items()}  # updated, none added
    assert {x.metadata["ragmem.run_id"] for v in after.values() for x in v} == {again.run_id, b.run_id}
