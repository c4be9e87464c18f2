"""A racing sweep against a local OpenAI-compatible judge that counts its requests: the race chooses a
configuration the grid's own paired test calls tied for best and sends fewer judge requests than the
grid on the same config; a budget is never spent past, and the sweep ends with the status ``budget``
and its survivors; the parent and the children record the race."""

from __future__ import annotations

import json

import pytest
from mlflow import MlflowClient

from ragmem.config.loading import resolve_config
from ragmem.run import engine
from tests.conftest import ROOT
from tests.openai_stub import Stub, data_block

pytestmark = pytest.mark.e2e


def _judge(request):
    """A verdict from the answer's length: a stand-in judge that prefers longer, fuller answers."""
    return {"verdict": "yes" if len(data_block(request, "answer")) > 60 else "no", "reason": "length"}


def _config(tmp_path, stub, name, cache=True, **sweep):
    return resolve_config(ROOT / "configs" / "sweep_retriever.yaml", extra={
        "metrics": ["pass_rate", "ndcg_at_10", "latency_p95"],
        "judge": {"type": "llm", "model": "judge", "base_url": stub.base_url, "cache_dir": str(tmp_path / f"cache-{name}"),
                  "cache": cache},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db", "artifact_root": str(tmp_path / "artifacts"),
                     "max_traces": 0},
        "stats": {"resamples": 300}, "sweep": sweep})


def test_a_race_chooses_among_the_grids_best_for_fewer_judge_requests(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    with Stub(chat=_judge) as stub:
        grid = engine.sweep(_config(tmp_path, stub, "grid"), preflight=False)
        grid_requests = len(stub.requests)
        race = engine.sweep(_config(tmp_path, stub, "race", method="race", race={"batch": 10}), preflight=False)
        race_requests = len(stub.requests) - grid_requests
    print(f"judge requests: grid {grid_requests}, race {race_requests}; race summary {race['race']}")
    # (identical answers of two configurations are one request: the judge cache serves the second)
    assert race["race"]["judge_requests"] >= race_requests  # (every attempt counted before it is sent)
    assert race_requests < grid_requests
    estimate = race["race"]["grid_judge_requests"]  # the race's rate per example x examples x configurations
    assert race["race"]["judge_requests_ratio"] == pytest.approx(race["race"]["judge_requests"] / estimate, abs=1e-4)
    tied = [c["params"] for c in grid["children"] if c["tied_for_best"]]
    assert race["best"]["params"] in tied
    stopped = [c for c in race["children"] if c["race"]["reason"].startswith("worse than")]
    assert stopped and all(c["race"]["stopped_at"] < 88 and not c["race"]["candidate"] for c in stopped)
    assert all(c["race"]["evidence"] >= c["race"]["evidence_needed"] for c in stopped)
    assert not any(c["tied_for_best"] for c in stopped)  # a child the race ruled out is never chosen
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    parent = client.get_run(race["parent_run_id"])
    assert parent.data.metrics["race.judge_requests"] == race_requests
    assert parent.data.metrics["race.grid_judge_requests"] == estimate
    assert "plots/race.png" in {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    child = client.get_run(stopped[0]["run_id"])
    assert child.data.tags["race.reason"].startswith("worse than type=")
    assert int(child.data.tags["race.stopped_at"]) == stopped[0]["race"]["stopped_at"]


@pytest.mark.parametrize("budget, sent", [(500, 360), (100, 100)])
def test_a_budget_is_never_spent_past(tmp_path, monkeypatch, budget, sent):
    """500: one round of 18 x 20 is 360 requests; the next would pass the budget, so the race ends before
    it. 100: the first round alone would pass it; request 101 is never sent (those judgements fail, named)."""
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    with Stub(chat=_judge) as stub:
        result = engine.sweep(_config(tmp_path, stub, "race", cache=False, method="race",
                                      budget={"judge_requests": budget}), preflight=False)
    assert len(stub.requests) <= sent <= budget  # (cache off: every configuration's verdict is a request)
    race = result["race"]
    assert race["ended"] == "budget" and race["judge_requests"] == sent and race["budget"]["judge_requests"] == budget
    left = [c for c in result["children"] if c["race"]["reason"] == "budget"]
    assert left and all(c["race"]["candidate"] and len(c["race"]["interval"]) == 2 for c in left)
    assert result["best"] is not None and result["best"]["run_id"] in {c["run_id"] for c in left}
    if budget == 100:
        assert race["budget"]["refused"] == 18 * 20 - 100
        summary = json.dumps(result)
        assert "sweep.budget.judge_requests 100 spent" in summary or any(
            c["metrics"].get("judge_failures") for c in result["children"])
