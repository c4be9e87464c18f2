"""Secrets inside the traffic stay out of every file (issue 60, point 4): OTLP traces whose root inputs
hold an API key and a password beside the query, whose answers and retrieved documents quote keys,
whose span attributes carry a bearer credential, and whose exception message names a key, evaluated
by ``ragmem run`` (Prefect flow, MLflow run, report): none of the planted values is in any file
under the home, the MLflow store and artifacts, the Prefect database, the output, or anything printed."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.e2e.test_secrets import files_holding

pytestmark = pytest.mark.e2e

PLANTED = {
    "input_key": "sk-live-INPUTKEY0123456789abcd",
    "password": "Hunter2-PASSWORD-77zq",
    "answer_key": "sk-proj-ANSWERKEY9876543210wxyz",
    "document": "DOCTOKEN-5c1e9a77f0",
    "bearer": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0ZXN0In0.SIGNATUREpart123456",
    "exception": "EXCKEY-77a1b2c3d4e5",
}


def _span(span_id: str, parent: str | None, name: str, start: int, end: int, attributes: dict, error: str | None = None):
    span = {"traceId": "", "spanId": span_id, "name": name, "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(end), "attributes": [{"key": k, "value": {"stringValue": v}}
                                                        for k, v in attributes.items()],
            "status": {"code": 2, "message": error} if error else {"code": 1}}
    if parent:
        span["parentSpanId"] = parent
    if error:
        span["events"] = [{"name": "exception", "timeUnixNano": str(end), "attributes": [
            {"key": "exception.type", "value": {"stringValue": "PermissionError"}},
            {"key": "exception.message", "value": {"stringValue": error}}]}]
    return span


def _traces(path):
    spans, start = [], 1_760_000_000_000_000_000
    for i in range(6):
        trace_id, t0 = f"{i + 1:032x}", start + i * 10**9
        failed = i == 5
        root_in = json.dumps({"query": f"How do I reset the router {i}?", "api_key": PLANTED["input_key"],
                              "user_password": PLANTED["password"]})
        answer = f"Reset it with key {PLANTED['answer_key']} then log in with password: {PLANTED['password']}."
        root = _span(f"{i + 1:016x}", None, "agent", t0, t0 + 5 * 10**8,
                     {"openinference.span.kind": "AGENT", "input.value": root_in, "input.mime_type": "application/json",
                      "http.request.header.authorization": f"Bearer {PLANTED['bearer']}",
                      **({} if failed else {"output.value": json.dumps({"answer": answer})})},
                     error=f"login refused for api_key={PLANTED['exception']}" if failed else None)
        retrieve = _span(f"{i + 101:016x}", root["spanId"], "retrieve", t0 + 10**7, t0 + 10**8, {
            "openinference.span.kind": "RETRIEVER", "input.value": "router reset",
            "retrieval.documents.0.document.id": "manual#3",
            "retrieval.documents.0.document.content": f"Hold the button 10 s. Service token: {PLANTED['document']}"})
        for span in (root, retrieve):
            span["traceId"] = trace_id
        spans += [root, retrieve]
    path.write_text(json.dumps({"resourceSpans": [{"resource": {"attributes": []},
                                                   "scopeSpans": [{"scope": {"name": "app"}, "spans": spans}]}]}))
    return path


def test_planted_secrets_in_the_traffic_reach_no_file_and_no_output(prefect_env, tmp_path):
    data = _traces(tmp_path / "traffic.json")
    config = tmp_path / "traffic.yaml"
    config.write_text(json.dumps({"experiment": "traffic-secrets", "data": {"traces": {"files": [str(data)]}},
                                  "tracking": {"uri": f"sqlite:///{tmp_path / 'eval.db'}", "max_traces": 10},
                                  "stats": {"resamples": 50}}), encoding="utf-8")
    done = run_cli(["run", str(config), "-o", "s.json", "-v"], env=prefect_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout + done.stderr
    assert [k for k, v in PLANTED.items() if v in printed] == []
    assert files_holding(list(PLANTED.values()), prefect_env, tmp_path, data) == []
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["n_examples"] == 6 and summary["counts"]["n_agent_errors"] == 1
    failed = next(n for n in summary["notes"] if "login refused for api_key=***" in n)  # the reason kept, its key masked
    assert "PermissionError" in failed
    assert any(p.name == "report.html" for p in tmp_path.rglob("*")) or any(
        p.name == "report.html" for p in (tmp_path / "mlruns").rglob("*") if (tmp_path / "mlruns").exists())
