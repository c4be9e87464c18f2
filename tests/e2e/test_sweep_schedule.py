"""Sweeps, scheduled deployments and run comparison, end to end on a local Prefect server."""

import json
import re
import signal
import subprocess
import sys
import urllib.error

import pytest
from mlflow import MlflowClient

from tests.conftest import ROOT, api_get, run_cli, wait_until

pytestmark = pytest.mark.e2e


def test_sweep_retriever_config(prefect_env, tmp_path, ragmem_main):
    done = run_cli(["sweep", str(ROOT / "configs" / "sweep_retriever.yaml"), "--output", "sweep.json",
                    "--set", "stats.resamples=300",  # (the choice's logic, not its figures: fewer resamples,
                    "--set", "tracking.max_traces=0"],   # and no traces: a third of its time, tested in test_engine)
                   env=prefect_env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "sweep.json").read_text())
    assert set(result) >= {"parent_run_id", "children", "best"}
    children = result["children"]
    assert len(children) == 18 and all(c["status"] == "FINISHED" for c in children)
    assert result["index_builds"] == 3  # one index per retriever type, shared by its 6 children

    client = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    parent = client.get_run(result["parent_run_id"])
    kids = client.search_runs([parent.info.experiment_id],
                              filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert len(kids) == 18
    keys = ("retriever.type", "retriever.top_k", "memory.short_window")
    assert len({tuple(k.data.params[p] for p in keys) for k in kids}) == 18
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"comparison.csv", "comparison.json", "sweep.json"} <= artifacts
    plots = {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert {"plots/ndcg_at_10_by_setting.png", "plots/hit_rate_at_10_by_setting.png", "plots/quality_vs_latency.png"} <= plots
    assert parent.data.tags["best_run_id"] == result["best"]["run_id"]
    # a sweep child is a run like any other: the same artifacts, its journal included
    child_artifacts = {a.path for a in client.list_artifacts(children[0]["run_id"])}
    assert child_artifacts == {"agent_outputs.jsonl", "config.json", "summary.json", "examples.csv", "examples.parquet",
                               "examples.json", "plots", "report.html"}
    # the choice: among the configurations tied with the top one, the smallest top_k, then window
    tied = [c for c in children if c["run_id"] in result["tied_for_best"]]
    top = max(c["metrics"]["ndcg_at_10"] for c in children)
    assert any(c["metrics"]["ndcg_at_10"] == top for c in tied) and len(tied) < len(children)
    assert all(not c["vs_best"]["significantly_worse"] for c in tied)
    smallest = min((c["params"]["retriever.top_k"], c["params"]["memory.short_window"]) for c in tied)
    assert (result["best"]["params"]["retriever.top_k"], result["best"]["params"]["memory.short_window"]) == smallest
    assert all(k.info.status == "FINISHED" for k in kids) and parent.info.status == "FINISHED"

    # hit rate and reference coverage do not fall as top_k grows (other settings fixed)
    by_point = {(c["params"]["retriever.type"], c["params"]["memory.short_window"], c["params"]["retriever.top_k"]):
                c["metrics"] for c in children}
    for kind in ("bm25", "tfidf", "hybrid"):
        for window in (1, 4):
            for metric in ("hit_rate_at_10", "reference_coverage"):
                series = [by_point[(kind, window, k)][metric] for k in (1, 3, 5)]
                assert series == sorted(series), (kind, window, metric, series)
            assert by_point[(kind, window, 5)]["hit_rate_at_10"] > by_point[(kind, window, 1)]["hit_rate_at_10"]

    listing = ragmem_main(["compare", "--experiment", "sweep-retriever", "--metric", "hit_rate_at_10", "--last", "5",
                           "--output", "cmp.json"], env=prefect_env, cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    rows = json.loads((tmp_path / "cmp.json").read_text())["runs"]
    values = [r["hit_rate_at_10"] for r in rows if r.get("hit_rate_at_10") is not None]
    assert len(rows) == 5 and values == sorted(values, reverse=True)


def test_a_failing_child_is_recorded_and_the_sweep_goes_on(prefect_env, tmp_path, ragmem_main):
    # the second child's agent fails to start at run time: it is recorded, the first one runs. In
    # this process (the sweep command's main(), its flow on the shared server), as the fast lane runs
    # commands: a sweep as a process of its own is test_sweep_retriever_config
    env = {**prefect_env, "PYTHONPATH": str(ROOT)}
    done = ragmem_main(["sweep", str(ROOT / "configs" / "sweep_retriever.yaml"), "--set", "experiment=sweep-fail", "--set", "tracking.max_traces=0",
                    "--set", "agent.type=python", "--set", "agent.target=tests.sample_agents:Breaks",
                    "--set", "sweep.grid={agent.params.broken: [false, true]}"], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    children = json.loads((tmp_path / "sweep.json").read_text())["children"]
    assert [c["status"] for c in children] == ["FINISHED", "FAILED"]
    assert "RuntimeError: backend refused the connection" in children[1]["error"]
    client = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    failed = client.get_run(children[1]["run_id"])
    assert failed.info.status == "FAILED" and "backend refused" in failed.data.tags["ragmem.error"]
    assert client.get_run(children[0]["run_id"]).info.status == "FINISHED"
    # every child failing is a failed sweep: still every result written, then one line and exit 2
    done = ragmem_main(["sweep", str(ROOT / "configs" / "sweep_retriever.yaml"), "--set", "experiment=sweep-all-fail", "--set", "tracking.max_traces=0",
                    "--set", "agent.type=python", "--set", "agent.target=tests.sample_agents:Breaks",
                    "--set", "sweep.grid={agent.params.broken: [true]}", "-o", "all.json"], env=env, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].startswith("error: sweep: every one of the 1"), \
        done.stderr
    assert [c["status"] for c in json.loads((tmp_path / "all.json").read_text())["children"]] == ["FAILED"]


def test_a_bad_grid_value_fails_before_any_child(prefect_env, tmp_path, ragmem_main):
    # chunk_overlap 300 >= chunk_size 200 is invalid: the sweep stops before it starts, one line, exit 2
    done = ragmem_main(["sweep", str(ROOT / "configs" / "sweep_retriever.yaml"), "--set", "experiment=sweep-bad",
                    "--set", "sweep.grid={corpus.chunk_overlap: [40, 300]}"], env=prefect_env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("ragmem | ")]
    assert lines == ["error: sweep.grid (chunk_overlap=300): corpus.chunk_overlap: must be smaller than "
                     "corpus.chunk_size (200), got 300"]
    assert not (tmp_path / "mlruns" / "mlflow.db").exists()  # nothing was started


def test_scheduled_deployment_and_a_triggered_run(prefect_env, tmp_path):
    api_url = f"http://127.0.0.1:{prefect_env['RAGMEM_PREFECT_PORT']}/api"
    serve = subprocess.Popen([sys.executable, "-m", "ragmem.cli", "serve", str(ROOT / "configs" / "demo.yaml"),
                              "--cron", "0 2 * * *", "--name", "nightly-test"], env=prefect_env, cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def deployed():
            try:
                return api_get(api_url, "/deployments/name/ragmem-evaluate/nightly-test")
            except urllib.error.HTTPError:
                return None

        deployment = wait_until(deployed, "deployment ragmem-evaluate/nightly-test", process=serve)
        assert [s["schedule"]["cron"] for s in deployment["schedules"]] == ["0 2 * * *"]
        assert deployment["parameters"]["config"]["experiment"] == "demo"

        triggered = run_cli(["trigger", "nightly-test"], env=prefect_env, cwd=tmp_path)  # as serve printed it
        assert triggered.returncode == 0, triggered.stderr
        assert triggered.stdout.startswith("triggered ragmem-evaluate/nightly-test: flow run ")
        flow_run = {"id": re.search(r"\(([0-9a-f-]{36})\)", triggered.stdout).group(1)}
        unknown = run_cli(["trigger", "nosuch"], env=prefect_env, cwd=tmp_path)
        assert unknown.returncode == 2 and "no deployment of that name" in unknown.stderr
        assert "ragmem-evaluate/nightly-test" in unknown.stderr

        def finished():
            state = api_get(api_url, f"/flow_runs/{flow_run['id']}")["state_type"]
            return state if state in ("COMPLETED", "FAILED", "CRASHED") else None

        assert wait_until(finished, "the triggered flow run", timeout=300, process=serve) == "COMPLETED"
        client = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
        experiment = client.get_experiment_by_name("demo")
        runs = client.search_runs([experiment.experiment_id],
                                  filter_string=f"tags.`prefect.flow_run_id` = '{flow_run['id']}'")
        assert len(runs) == 1 and runs[0].info.status == "FINISHED"
        assert runs[0].data.metrics["f1"] > 0
        tags = runs[0].data.tags  # a scheduled run is a JOB in MLflow's Source column
        assert tags["mlflow.source.type"] == "JOB" and tags["mlflow.source.name"].startswith("ragmem serve ")

        # ragmem server status lists the deployment: its cron, its next run, its last run's state
        status = run_cli(["server", "status"], env=prefect_env, cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        listed = next(line for line in status.stdout.splitlines() if "ragmem-evaluate/nightly-test:" in line)
        assert "cron '0 2 * * *'" in listed and "last run COMPLETED" in listed, status.stdout
        assert "next run " in listed or "no run scheduled yet" in listed, listed
        serve.send_signal(signal.SIGTERM)  # stopped: its schedule paused, and said so
        serve.wait(timeout=60)
        status = run_cli(["server", "status"], env=prefect_env, cwd=tmp_path)
        listed = next(line for line in status.stdout.splitlines() if "ragmem-evaluate/nightly-test:" in line)
        assert "paused: no run is scheduled" in listed, status.stdout
    finally:
        serve.terminate()
        serve.wait(timeout=30)


def test_bad_cron_is_a_user_error(prefect_env, tmp_path, ragmem_main):
    done = ragmem_main(["serve", str(ROOT / "configs" / "demo.yaml"), "--cron", "every day"], env=prefect_env, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].startswith("error: --cron:")


def test_paired_compare_top_k_1_vs_5(prefect_env, tmp_path, ragmem_main, monkeypatch):
    # the two runs through the Python API (the same engine as `ragmem run`), in this process, in the
    # store of tmp_path
    import ragmem

    monkeypatch.chdir(tmp_path)
    summaries = [ragmem.evaluate(None, config=str(ROOT / "configs" / "reference_agent.yaml"), retriever={"top_k": k},
                                 tracking={"max_traces": 0}).summary for k in (1, 5)]
    assert all({"f1", "hit_rate_at_10"} <= set(s["ci"]) for s in summaries)  # intervals in the summary ...
    ids = [s["run_id"] for s in summaries]
    run = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db").get_run(ids[0])
    assert run.data.metrics["f1_ci_low"] <= run.data.metrics["f1"] <= run.data.metrics["f1_ci_high"]  # ... and in MLflow
    done = ragmem_main(["compare", *ids, "--resamples", "400", "--output", "paired.json"], env=prefect_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "95% CI" in done.stdout and "p (Holm)" in done.stdout and "retriever.top_k: 1 -> 5" in done.stdout
    result = json.loads((tmp_path / "paired.json").read_text())
    rows = {r["metric"]: r for r in result["metrics"]}
    assert result["n_shared"] == 64 and {"f1", "hit_rate_at_10", "reference_coverage", "bleu", "latency_p95"} <= set(rows)
    coverage = rows["reference_coverage"]
    assert coverage["diff"] > 0 and coverage["ci_low"] > 0 and coverage["p_value"] < 0.05
    # on 64 examples, p = 0.015 alone is not enough once the 75 metrics compared are corrected for
    # (Holm): not marked, and the smallest difference this comparison could see is printed beside it
    assert coverage["p_holm"] >= coverage["p_value"] and not coverage["marked"]
    assert coverage["min_detectable"] > coverage["diff"]
    for row in rows.values():
        assert row["p_value"] is None or 0 < row["p_value"] <= 1
        excludes = row["ci_low"] is not None and (row["ci_low"] > 0 or row["ci_high"] < 0)
        assert row["marked"] == (excludes and row["p_holm"] is not None and row["p_holm"] < 0.05)

    bad = ragmem_main(["compare", ids[0]], env=prefect_env, cwd=tmp_path)  # refused before any store: in process
    assert bad.returncode == 2 and "give two run ids" in bad.stderr


def test_bench_memory_two_conversations_with_baselines(prefect_env, tmp_path, ragmem_main):
    from tests.conftest import fetch_shared

    fetch_shared("locomo", prefect_env)  # as `ragmem data fetch locomo` does from GitHub
    # in this process (the command's main(), its flow on the shared server), as the fast lane runs commands
    done = ragmem_main(["bench-memory", str(ROOT / "configs" / "locomo.yaml"), "--limit-conversations", "2",
                        "--output", "bench.json"], env=prefect_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr  # its speed is measured by benchmarks/, not asserted here
    result = json.loads((tmp_path / "bench.json").read_text())
    assert result["n_conversations"] == 2 and result["n_questions"] > 200
    assert [m["method"] for m in result["methods"]] == ["reference", "full_context", "no_memory"]
    client = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("locomo")
    runs = {r.data.tags.get("bench.method"): r for r in client.search_runs([experiment.experiment_id])
            if r.data.tags.get("bench.method")}
    assert set(runs) == {"reference", "full_context", "no_memory"}  # baselines beside it, same experiment
    reference = runs["reference"].data.metrics
    for name in ("token_f1", "bleu_1", "judge_score", "evidence_recall", "search_latency_p50", "search_latency_p95",
                 "answer_latency_p50", "answer_latency_p95", "context_tokens_mean"):
        assert name in reference
    for category in (1, 2, 3, 4):
        assert {f"token_f1_cat{category}", f"bleu_1_cat{category}", f"judge_score_cat{category}"} <= set(reference)
    # category 5 as abstention: its own judge score and count, no F1 (an abstention has no answer to overlap)
    assert {"judge_score_cat5", "count/n_questions_cat5"} <= set(reference) and "token_f1_cat5" not in reference
    assert reference["evidence_recall"] > 0
    # no memory recalls no turn: its evidence recall is undefined (not logged, counted), never 0
    assert "evidence_recall" not in runs["no_memory"].data.metrics
    assert runs["no_memory"].data.metrics["count/n_evidence_undefined"] > 200
    assert runs["no_memory"].data.metrics["context_tokens_mean"] == 0
    artifacts = {a.path for a in client.list_artifacts(result["parent_run_id"])}
    assert {"locomo_results.csv", "locomo_results.json"} <= artifacts


def test_bench_memory_exits_2_only_when_every_method_failed(prefect_env, tmp_path, ragmem_main):
    from tests.memory.test_memory import _conversation

    data = tmp_path / "c1.json"
    data.write_text(json.dumps(_conversation()))
    env = {**prefect_env, "PYTHONPATH": str(ROOT)}
    dead = {"name": "dead", "type": "python", "target": "tests.memory.test_memory:DeadSearch"}
    config = tmp_path / "bench.yaml"
    for methods, code in (([dead, "reference"], 0), ([dead, {**dead, "name": "dead_too"}], 2)):
        config.write_text(json.dumps({"experiment": "bench-exit", "bench": {"data": str(data), "methods": methods}}))
        done = ragmem_main(["bench-memory", str(config), "-o", "bench.json"], env=env, cwd=tmp_path)
        assert done.returncode == code, done.stderr
        assert "Traceback" not in done.stderr and "dead FAILED: MethodFailed: every one of the 4 questions failed" in done.stdout
        statuses = [m["status"] for m in json.loads((tmp_path / "bench.json").read_text())["methods"]]
        assert statuses == (["FAILED", "FINISHED"] if code == 0 else ["FAILED", "FAILED"])
    assert done.stderr.strip().splitlines()[-1].startswith("error: bench-memory: every one of the 2 methods failed")
