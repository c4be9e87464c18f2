"""A run's agent traces written in one batch (:mod:`ragmem.tracking.agent_traces`) read back from
MLflow as the same traces MLflow's own tracing API makes of the same calls (the oracle: the API
ragmem used before, kept here), with their assessments, and found by the run."""

from __future__ import annotations

import contextlib
import json
from types import SimpleNamespace

import pytest
from mlflow import MlflowClient

from ragmem.tracking import agent_traces
from ragmem.tracking.store import Feedback, Tracker

T0 = 1_796_000_000_000_000_000


def _context(text: str, source: str = "rag"):
    return SimpleNamespace(to_dict=lambda: {"id": text[:4], "text": text}, source=source)


CALLS = [  # (example, output): a failed call, Chinese text, a stage of no known type, a memory context, no stages
    (SimpleNamespace(id="e1", query="Where is the 检索 index kept?", session_id="s1"),
     SimpleNamespace(started_at_ns=T0, latency_s=0.61, timings_s={"retrieve": 0.12, "llm": 0.4}, attempts=2,
                     contexts=[_context("索引保存在磁盘上。"), _context("remembered: disk", "memory_long")],
                     answer="在磁盘上", error=None)),
    (SimpleNamespace(id="e2", query="What failed?", session_id=None),
     SimpleNamespace(started_at_ns=T0 + 5 * 10**9, latency_s=2.5, timings_s={"retrieve": 0.2, "tool": 3.0}, attempts=3,
                     contexts=[], answer="", error="HTTP 503 after 3 attempts")),
    (SimpleNamespace(id="e3", query="No stages?", session_id=None),
     SimpleNamespace(started_at_ns=T0 + 9 * 10**9, latency_s=0.05, timings_s={}, attempts=1,
                     contexts=[_context("plain")], answer="yes", error=None)),
]
FEEDBACK = {"e1": [Feedback("verdict", 1, "covers the reference", "LLM_JUDGE", "judge-model"), Feedback("ndcg_at_10", 0.63)],
            "e2": [Feedback("verdict", 0, "no answer", "LLM_JUDGE", "judge-model")], "e3": []}


@contextlib.contextmanager
def _exported_to(uri: str):
    """MLflow's tracer exports to the process-wide tracking URI only: set for the block, synchronously
    (no background queue), then put back as it was."""
    import mlflow
    from mlflow.tracking._tracking_service import utils as tracking_utils

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.setattr(tracking_utils, "_tracking_uri", tracking_utils._tracking_uri)
        mlflow.set_tracking_uri(uri)
        yield


def through_mlflows_tracing_api(tracker: Tracker, run_id: str, experiment_id: str, calls=CALLS, feedback=FEEDBACK) -> None:
    """What ragmem did before: MLflow's tracing API, a transaction per span, trace and assessment
    (``benchmarks/bench_agent_traces.py --api`` times it)."""
    import mlflow
    from mlflow.entities import AssessmentSource
    from mlflow.entities import Feedback as MlflowFeedback
    from mlflow.tracing.client import TracingClient

    client = tracker.client
    with _exported_to(tracker.uri):
        traced = []
        for ex, out in agent_traces.traced_calls([ex for ex, _ in calls], [out for _, out in calls], len(calls)):
            end = out.started_at_ns + int(out.latency_s * 1e9)
            root = client.start_trace("agent", span_type="AGENT", inputs={"query": ex.query, "session_id": ex.session_id},
                                      experiment_id=experiment_id, start_time_ns=out.started_at_ns, run_id=run_id,
                                      tags={"ragmem.example_id": ex.id}, attributes={"attempts": str(out.attempts)})
            cursor = out.started_at_ns
            for stage, seconds in out.timings_s.items():
                span = client.start_span(stage, trace_id=root.trace_id, parent_id=root.span_id,
                                         span_type=agent_traces.STAGE_SPAN_TYPES.get(stage, "UNKNOWN"), start_time_ns=cursor)
                cursor = min(end, cursor + int(seconds * 1e9))
                contexts = [c.to_dict() for c in out.contexts if stage == "retrieve" and c.source == "rag"] or None
                client.end_span(root.trace_id, span.span_id, outputs=contexts, end_time_ns=cursor)
            client.end_trace(root.trace_id, outputs={"answer": out.answer, "n_contexts": len(out.contexts),
                                                     "error": out.error},
                             status="ERROR" if out.error else "OK", end_time_ns=end)
            traced.append((ex.id, root.trace_id))
        mlflow.flush_trace_async_logging()
        for example_id, trace_id in traced:
            for f in feedback.get(example_id, ()):
                TracingClient(tracker.uri).log_assessment(trace_id, MlflowFeedback(
                    name=f.name, value=f.value, rationale=f.rationale,
                    source=AssessmentSource(source_type=f.source_type, source_id=f.source_id)))


def _read_back(client: MlflowClient, experiment_id: str, run_id: str) -> dict[str, dict]:
    """The run's traces as MLflow reads them, by example, without what differs by construction: ids,
    creation times, the artifact folder, and two things of MLflow's tracer's own (the start time it
    passes to its span processor as an attribute, which no reader uses; the size it measures before
    the assessments are added, where the batch measures the trace with them)."""
    out = {}
    for trace in client.search_traces(locations=[experiment_id], run_id=run_id):
        full = client.get_trace(trace.info.trace_id).to_dict()
        info = full["info"]
        assert info["trace_metadata"].pop("mlflow.sourceRun") == run_id
        for key in ("mlflow.trace.sizeStats", "mlflow.trace.sizeBytes"):
            assert json.loads(info["trace_metadata"].pop(key))
        info.pop("trace_id")
        info["tags"].pop("mlflow.artifactLocation")
        info["assessments"] = sorted(({k: v for k, v in a.items() if k not in ("assessment_id", "trace_id", "create_time",
                                                                              "last_update_time")}
                                      for a in info.get("assessments", ())), key=lambda a: a["assessment_name"])
        for span in full["data"]["spans"]:
            for key in ("trace_id", "span_id", "parent_span_id"):
                span[key] = bool(span[key])
            span["attributes"].pop("mlflow.traceRequestId")
            span["attributes"].pop("mlflow.spanStartTimeNs", None)
        out[info["tags"]["ragmem.example_id"]] = full
    return out


def _run_in_store(folder, experiment: str) -> tuple[Tracker, str, str]:
    """A tracker on a new sqlite store in ``folder``, and an experiment and an open run in it."""
    tracker = Tracker(f"sqlite:///{folder / 'mlflow.db'}", artifact_root=str(folder / "artifacts"))
    experiment_id = tracker.experiment_id(experiment)
    return tracker, experiment_id, tracker.client.create_run(experiment_id).info.run_id


def test_a_batch_of_traces_reads_back_as_mlflows_tracing_api_writes_them(tmp_path):
    both = {}
    for way in ("api", "batch"):
        tracker, experiment_id, run_id = _run_in_store(tmp_path / way, "traces")
        if way == "api":
            through_mlflows_tracing_api(tracker, run_id, experiment_id)
        else:
            n = tracker.log_agent_traces(run_id, "traces", [ex for ex, _ in CALLS], [out for _, out in CALLS], 10,
                                         assess=lambda ids: {i: FEEDBACK[i] for i in ids})
            assert n == 3
        both[way] = _read_back(tracker.client, experiment_id, run_id)
    assert set(both["batch"]) == {"e1", "e2", "e3"}
    for example in ("e1", "e2", "e3"):
        assert both["batch"][example] == both["api"][example], example
    e1 = both["batch"]["e1"]
    assert [s["name"] for s in e1["data"]["spans"]] == ["agent", "retrieve", "llm"]
    assert "索引保存在磁盘上" in e1["data"]["spans"][1]["attributes"]["mlflow.spanOutputs"]  # rag contexts only
    assert "remembered" not in json.dumps(e1["data"]["spans"], ensure_ascii=False)
    assert [a["assessment_name"] for a in e1["info"]["assessments"]] == ["ndcg_at_10", "verdict"]
    assert both["batch"]["e2"]["info"]["state"] == "ERROR"


def test_the_slowest_and_failed_calls_are_traced_first_within_the_limit(tmp_path):
    tracker, experiment_id, run_id = _run_in_store(tmp_path, "limited")
    untimed = (SimpleNamespace(id="e4", query="replayed", session_id=None), SimpleNamespace(started_at_ns=None))
    examples, outputs = zip(*CALLS, untimed)
    assert tracker.log_agent_traces(run_id, "limited", list(examples), list(outputs), 2) == 2
    found = tracker.client.search_traces(locations=[experiment_id], run_id=run_id)
    assert sorted(t.info.tags["ragmem.example_id"] for t in found) == ["e1", "e2"]  # failed e2, then e1 (0.61 s)
    assert all(not t.info.assessments for t in found)  # nothing to assess: none written
    assert tracker.log_agent_traces(run_id, "limited", [untimed[0]], [untimed[1]], 5) == 0


def test_a_store_that_keeps_no_spans_gets_each_traces_spans_as_its_artifact(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow's file store: no span table of its own
    uri = (tmp_path / "mlruns").as_uri()
    client = MlflowClient(uri)
    experiment_id = client.create_experiment("files")
    run_id = client.create_run(experiment_id).info.run_id
    ex, out = CALLS[0]
    assert agent_traces.log(uri, run_id, experiment_id, [(ex, out)], lambda ids: {i: FEEDBACK[i] for i in ids}) == 1
    [trace] = client.search_traces(locations=[experiment_id])
    full = client.get_trace(trace.info.trace_id)
    assert [s.name for s in full.data.spans] == ["agent", "retrieve", "llm"]
    assert {a.name for a in full.info.assessments} == {"verdict", "ndcg_at_10"}
    assert full.info.tags["ragmem.example_id"] == "e1"


def test_an_error_of_the_store_is_raised_not_swallowed(tmp_path, monkeypatch):
    from mlflow.tracing.client import TracingClient

    tracker, experiment_id, run_id = _run_in_store(tmp_path, "broken")

    def refuse(self, location, spans):
        raise RuntimeError("database is locked")

    monkeypatch.setattr(TracingClient, "log_spans", refuse)
    with pytest.raises(RuntimeError, match="database is locked"):
        agent_traces.log(tracker.uri, run_id, experiment_id, CALLS[:1])


def test_a_human_label_for_an_example_without_a_trace_gets_the_trace_mlflows_api_made_for_it(tmp_path):
    """``ragmem labels import`` on a replayed run: a trace made for the example, its label on it, as
    MLflow's tracing API made it before (times aside: each is made when the label is imported)."""
    from mlflow.entities import AssessmentSource
    from mlflow.entities import Feedback as MlflowFeedback
    from mlflow.tracing.client import TracingClient

    both = {}
    for way in ("api", "batch"):
        tracker, experiment_id, run_id = _run_in_store(tmp_path / way, "labels")
        if way == "api":
            with _exported_to(tracker.uri):
                root = tracker.client.start_trace("labelled example", span_type="UNKNOWN", inputs={"query": "问题?"},
                                                  experiment_id=experiment_id, run_id=run_id,
                                                  tags={"ragmem.example_id": "e9"})
                tracker.client.end_trace(root.trace_id, outputs={"answer": "答案"})
            TracingClient(tracker.uri).log_assessment(root.trace_id, MlflowFeedback(
                name="human_label", value=1, rationale="imported with ragmem labels import",
                source=AssessmentSource(source_type="HUMAN", source_id="ragmem labels import sheet.csv")))
        else:
            rows = [("e9", 1, "问题?", "答案")]
            assert tracker.log_human_labels(run_id, experiment_id, rows, "ragmem labels import sheet.csv") == 1
            assert tracker.log_human_labels(run_id, experiment_id, rows, "ragmem labels import sheet.csv") == 1
        [read] = _read_back(tracker.client, experiment_id, run_id).values()
        for key in ("request_time", "execution_duration_ms"):
            read["info"].pop(key, None)
        for span in read["data"]["spans"]:
            assert span.pop("end_time_unix_nano") >= span.pop("start_time_unix_nano")
        both[way] = read
    assert both["batch"] == both["api"]
    assert [a["assessment_name"] for a in both["batch"]["info"]["assessments"]] == ["human_label"]  # once, imported twice
