"""A run's metrics from chunks (ragmem.stats.run_statistics) against the whole table's (ragmem.run.pipeline.score):
every value equal to 1e-9 and every Poisson interval equal, whatever the chunk sizes; the shipped
configs and a generated set with partial labels, latencies and context sources."""

import json
import math
import random
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

import ragmem
from ragmem.data.loaders import DataFile, load_dataset
from ragmem.errors import DataError
from ragmem.metrics.estimators import ppi_from_sums, ppi_mean_ci, ppi_statistics
from ragmem.run import pipeline, prepare
from ragmem.stats.run_statistics import additive, RunStatistics
from ragmem.tracking import files
from ragmem.tracking.compare import paired_comparison
from tests.conftest import ROOT, SEED


def _generated(n: int, seed: int = 3) -> list[dict]:
    rng = random.Random(seed)
    words = ["检索", "向量", "记忆", "模型", "答案", "retrieval", "memory", "vector", "answer", "chunk", "rank", "上下文"]
    text = lambda k: " ".join(rng.choice(words) for _ in range(k))  # noqa: E731
    out = []
    for i in range(n):
        reference = text(rng.randint(1, 6))
        contexts = [{"id": f"c{rng.randrange(40)}", "text": text(rng.randint(2, 8)),
                     "source": rng.choice(["rag", "memory_short", "memory_long"])} for _ in range(rng.randint(0, 4))]
        record = {"id": f"g{i}", "query": text(3), "reference_answer": reference,
                  "generated_answer": reference if rng.random() < 0.4 else text(rng.randint(1, 6)), "context": contexts}
        if rng.random() < 0.3:
            record["label"] = rng.randint(0, 1)
        if rng.random() < 0.8:
            record["latency_ms"] = round(rng.lognormvariate(5, 0.7), 3)
        if contexts and rng.random() < 0.7:
            record["relevant_context_ids"] = [rng.choice(contexts)["id"]]
        out.append(record)
    return out


def _scored_in_chunks(cfg, components, examples, outputs, judgements, size: int) -> RunStatistics:
    run = RunStatistics(cfg.stats.resamples, cfg.seed, cfg.stats.confidence)
    for start in range(0, len(examples), size):
        part = slice(start, start + size)
        table = pipeline.build_table(examples[part], outputs[part], judgements[part], components.keywords)
        table, result = pipeline.scored(table, cfg, components)
        run.add(table, result, pipeline.run_aggregators(table, result, cfg))
    return run


def _check(config, sizes, path=None, **extra):
    """The whole table's values and intervals against the chunks' at each of ``sizes``."""
    cfg = prepare.resolve(config, data=path, extra={"tracking": {"enabled": False}, **extra})
    components = pipeline.build_components(cfg)
    dataset = pipeline.load(cfg)
    examples = dataset.examples
    outputs = pipeline.time_agent(components.agent, examples, cfg)
    judgements = pipeline.judge(components.judge, examples, outputs)
    _, whole = pipeline.score(pipeline.build_table(examples, outputs, judgements, components.keywords), cfg, components)
    usage = set(pipeline.usage_metrics(components))
    runs = [_scored_in_chunks(cfg, components, examples, outputs, judgements, size) for size in sizes]
    for size, run in zip(sizes, runs):
        assert not run.unmerged, (size, run.unmerged)
        values = run.values()
        for name, value in whole.values.items():
            if name in usage:
                continue
            got = values.get(name)
            assert (got is None) == (value is None), (size, name, value, got)
            assert value is None or math.isclose(got, value, rel_tol=1e-9, abs_tol=1e-9), (size, name, value, got)
        assert {k: v for k, v in values.items() if v is not None} .keys() <= whole.values.keys(), size
        intervals = run.intervals([n for n in whole.ci])
        for name, ci in whole.ci.items():
            assert (intervals[name] is None) == (ci is None), (size, name)
            if ci is not None:
                assert np.allclose(intervals[name], ci, rtol=0, atol=1e-9), (size, name, ci, intervals[name])
        assert run.undefined == whole.undefined, size
    first = runs[0].intervals()
    for run in runs[1:]:  # identical, whatever the chunks (sums added in another order: 12 digits)
        for name, ci in run.intervals().items():
            assert (ci is None) == (first[name] is None)
            assert ci is None or np.allclose(ci, first[name], rtol=0, atol=1e-12), name
    return whole, runs


@pytest.mark.parametrize("config", ["demo.yaml", "reference_agent.yaml"])
def test_the_shipped_configs_give_the_same_values_and_intervals_in_chunks(config, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    whole, _ = _check(ROOT / "configs" / config, [7, 10_000])
    assert len(whole.ci) > 20  # every aggregate has its interval, the per-source shares included
    assert whole.ci["coverage_rag"] is not None


def test_the_seed_samples_give_the_same_values_in_chunks(tmp_path, monkeypatch):
    if not SEED.is_dir():
        pytest.skip(f"{SEED} not found (the workplace's shared/data folder is absent)")
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    files = [{"path": str(SEED / "evaluation_samples_true.json"), "label": 1},
             {"path": str(SEED / "evaluation_samples_false.json"), "label": 0}]
    _check(ROOT / "configs" / "seed_samples.yaml", [3, 1000], data={"files": files})


def test_generated_examples_with_partial_labels_latencies_and_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    path = tmp_path / "data.json"
    path.write_text(json.dumps(_generated(1500), ensure_ascii=False), encoding="utf-8")
    whole, runs = _check(ROOT / "configs" / "default.yaml", [100, 1000, 100_000], path=str(path),
                         metrics=["accuracy", "f1", "avg_coverage", "latency_p95", "latency_max", "ndcg_at_k",
                                  "bleu", "chrf", "rouge_l", "per_source"])
    for name in ("pass_rate_ppi", "latency_p95", "bleu", "coverage_memory_long", "ndcg_at_3"):
        assert whole.values[name] is not None and runs[0].values()[name] is not None, name
    assert runs[0].n == 1500


def test_a_two_stage_interval_is_refused_by_chunk():
    run = RunStatistics(10)
    from ragmem.metrics.base import Aggregator
    agg = Aggregator("sum", np.ones((2, 2)), lambda s: 1.0, resum=lambda rng, counts: counts)
    table = pd.DataFrame({"id": ["a", "b"]})
    from ragmem.metrics.base import MetricResult
    with pytest.raises(ValueError, match="judge.samples"):
        run.add(table, MetricResult(values={"pass_rate": 1.0}), {"pass_rate": agg})


def test_counts_add_and_a_count_no_chunk_reported_stays_null():
    assert additive("n_labelled") and additive("confusion_tp") and additive("faithfulness_failures")
    assert not additive("pass_rate") and not additive("faithfulness_pass_rate")
    from ragmem.metrics.base import MetricResult
    run = RunStatistics(0)
    for n, labelled in ((2, 1.0), (3, None), (1, 2.0)):
        run.add(pd.DataFrame({"id": [f"{n}-{i}" for i in range(n)]}),
                MetricResult(values={"n_labelled": labelled, "n_latency_measured": None}), {})
    assert run.values() == {"n_labelled": 3.0, "n_latency_measured": None}
    assert run.n == 6


def test_the_ppi_estimate_from_sums_is_ppi_mean_ci():
    rng = np.random.default_rng(5)
    for _ in range(50):
        n, big_n = rng.integers(2, 40), rng.integers(1, 200)
        y, f, u = rng.integers(0, 2, n).astype(float), rng.integers(0, 2, n).astype(float), rng.integers(0, 2, big_n).astype(float)
        rows = ppi_statistics(np.r_[y, np.zeros(big_n)], np.r_[f, u], np.r_[np.ones(n, bool), np.zeros(big_n, bool)],
                              np.r_[np.zeros(n, bool), np.ones(big_n, bool)])
        ours, oracle = ppi_from_sums(rows.sum(axis=0), 0.9), ppi_mean_ci(y, f, u, 0.9)
        assert math.isclose(ours.estimate, oracle.estimate, abs_tol=1e-9)
        assert math.isclose(ours.low, oracle.low, abs_tol=1e-9) and math.isclose(ours.high, oracle.high, abs_tol=1e-9)
        assert math.isclose(ours.lam, oracle.lam, abs_tol=1e-9)


# ---- the streamed run (data.chunk_size smaller than the data) against the held one ----------------

DEMO = str(ROOT / "ragmem" / "datasets" / "demo_bilingual.json")


def _demo(chunk_size=None, **extra):
    data = {"files": [{"path": DEMO}], **({"chunk_size": chunk_size} if chunk_size else {})}
    return {"experiment": extra.pop("experiment", "streamed"), "data": data, **extra}


def test_a_streamed_run_gives_the_held_runs_summary_table_and_notes(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    held = ragmem.evaluate(None, _demo(), track=False)
    streamed = ragmem.evaluate(None, _demo(7), track=False)
    assert held.table_path is None and streamed.table_path is not None and streamed.table_path.is_file()
    for name, value in held.metrics.items():
        if name == "keywords_cache_hit_rate":  # usage: how the texts came in batches, not a result
            continue
        assert streamed.metrics[name] == pytest.approx(value, abs=1e-9, nan_ok=True) if value is not None \
            else streamed.metrics[name] is None, name
    assert streamed.summary["ci"].keys() == held.summary["ci"].keys()
    for name, ci in held.summary["ci"].items():
        assert streamed.summary["ci"][name] == pytest.approx(ci, abs=1e-9), name
    for key in ("counts", "notes", "n_examples", "n_errors", "judge_unreliable"):
        assert streamed.summary[key] == held.summary[key], key
    pd.testing.assert_frame_equal(streamed.table, held.table, check_exact=False, atol=1e-12)
    folder = streamed.table_path.parent
    del streamed
    import gc
    gc.collect()
    assert not folder.exists()  # an untracked run's table goes with its result
    assert not any((tmp_path / "runs").glob("*"))  # and its journal folder is removed


def test_a_tracked_streamed_run_logs_the_held_runs_files_and_compares(tmp_path, monkeypatch, shared_store):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    tracking = {"uri": shared_store["uri"], "artifact_root": shared_store["artifact_root"]}
    held = ragmem.evaluate(None, _demo(tracking=tracking, experiment="streamed-tracked"))
    streamed = ragmem.evaluate(None, _demo(5, tracking=tracking, experiment="streamed-tracked"))
    client = MlflowClient(shared_store["uri"])
    folders = [Path(client.get_run(r).info.artifact_uri.removeprefix("file://")) for r in (held.run_id, streamed.run_id)]
    for name in ("examples.csv", "examples.json"):  # the copies, byte for byte
        assert (folders[0] / name).read_bytes() == (folders[1] / name).read_bytes(), name
    pd.testing.assert_frame_equal(files.read_parquet(folders[1] / "examples.parquet"),
                                  files.read_parquet(folders[0] / "examples.parquet"))
    ids = re.compile(r"[0-9a-f]{32}|[0-9a-f]{8}")
    pages = [ids.sub("", (f / "report.html").read_text(encoding="utf-8")) for f in folders]
    assert pages[0] == pages[1]
    result = paired_comparison(client, held.run_id, streamed.run_id, ["pass_rate", "avg_coverage"], resamples=200)
    assert result["n_shared"] == 36 and all(r["diff"] == pytest.approx(0, abs=1e-12) for r in result["metrics"])
    assert streamed.summary["metrics"] == pytest.approx(held.summary["metrics"], abs=1e-9)


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_a_streamed_dataset_reads_its_chunks_as_the_held_one(tmp_path, fmt):
    records = _generated(230)
    path = tmp_path / f"data.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    else:
        frame = pd.DataFrame([{**r, "context": json.dumps(r["context"], ensure_ascii=False),
                               "relevant_context_ids": json.dumps(r.get("relevant_context_ids", []))} for r in records])
        frame["label"] = frame["label"].astype("Int64")
        frame.to_csv(path, index=False) if fmt == "csv" else frame.to_parquet(path)
    held = load_dataset([DataFile(path)])
    streamed = load_dataset([DataFile(path)], chunk_size=50)
    assert not held.streamed and streamed.streamed and len(streamed) == len(held) == 230
    assert streamed.sha256 == held.sha256 and streamed.examples == []
    chunks = list(streamed.chunks())
    assert [len(c) for c in chunks] == [50, 50, 50, 50, 30]
    assert [e for c in chunks for e in c] == held.examples


def test_a_streamed_dataset_refuses_a_duplicate_id_and_a_bad_record_like_the_held_one(tmp_path):
    records = _generated(120)
    records[97]["id"] = records[3]["id"]
    path = tmp_path / "dup.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    for size in (None, 10):
        with pytest.raises(DataError, match=r"record 98: field 'id': duplicate id 'g3' \(also record 4\)"):
            load_dataset([DataFile(path)], chunk_size=size)
    records[97]["id"], records[50]["query"] = "fine", ""
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with pytest.raises(DataError, match=r"record 51: field 'query'"):
        load_dataset([DataFile(path)], chunk_size=10)


def test_a_streamed_run_draws_its_label_sheet_from_every_chunk(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _generated(400)), encoding="utf-8")
    result = ragmem.evaluate(None, {"data": {"files": [{"path": str(path)}], "chunk_size": 60},
                                    "judge": {"label_sample": 30}}, track=False, journal=True)
    sheet = pd.read_csv(tmp_path / "runs" / result.journal_key / "labels_to_fill.csv")
    assert len(sheet) == 30 and sheet["example_id"].is_unique
    table = result.table.set_index("id")
    assert table.loc[sheet["example_id"], "label"].isna().all() and table.loc[sheet["example_id"], "verdict"].notna().all()
    positions = sorted(int(i[1:]) for i in sheet["example_id"])
    assert positions[-1] > 200  # drawn from the later chunks too, not the first rows only
    assert (sheet["judge_verdict"] == 1).any() and (sheet["judge_verdict"] == 0).any()  # stratified by verdict


def test_a_dry_run_of_a_streamed_dataset_counts_every_example(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    judge = {"type": "llm", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    judge = dict(judge=judge, embeddings={"model": "e", "base_url": "http://127.0.0.1:9/v1"})
    held = ragmem.dry_run(None, _demo(**judge), preflight=False)
    streamed = ragmem.dry_run(None, _demo(5, **judge), preflight=False)
    assert streamed.examples == held.examples == 36
    assert [(line.metric, line.endpoint, line.requests, line.tokens_in) for line in streamed.lines] == \
        [(line.metric, line.endpoint, line.requests, line.tokens_in) for line in held.lines] and held.lines


def test_the_parts_join_into_one_table_whatever_each_chunk_held(tmp_path):
    from ragmem.run.batching import join_parts

    parts = tmp_path / "parts"
    parts.mkdir()
    chunks = [pd.DataFrame({"id": ["a", "b"], "label": pd.array([None, None], dtype="Int64"), "free": [1, 2],
                            "contexts": [[{"text": "x"}], []], "judge_error": [None, None]}),
              pd.DataFrame({"id": ["c"], "label": pd.array([1], dtype="Int64"), "free": ["text"],
                            "contexts": [[{"text": "y", "id": "c1"}]], "judge_error": ["timeout"],
                            "keyword_verdict": pd.array([0], dtype="Int64")})]
    for i, chunk in enumerate(chunks):
        files.table_file(chunk, parts, f"part-{i:05d}", "parquet")
    table = files.read_table(join_parts(parts, tmp_path / "examples.parquet"))
    assert not parts.exists()
    assert table["id"].tolist() == ["a", "b", "c"]
    assert table["label"].tolist()[2] == 1 and table["label"].isna().tolist() == [True, True, False]
    assert table["free"].tolist() == ["1", "2", "text"]  # numbers in one chunk, text in the other: text
    assert table["contexts"].tolist() == [[{"text": "x"}], [], [{"text": "y", "id": "c1"}]]
    assert table["judge_error"].tolist() == [None, None, "timeout"]
    assert table["keyword_verdict"].isna().tolist() == [True, True, False]  # a column one chunk lacks: null


def test_a_streamed_run_traces_the_failed_and_slowest_calls_of_every_chunk(tmp_path, monkeypatch, shared_store):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    data = tmp_path / "d.jsonl"
    queries = ["a", "b", "c", "d", "fail-1", "e", "f", "g", "fail-2", "h"]
    data.write_text("\n".join(json.dumps({"id": q, "query": q, "reference_answer": q}) for q in queries))
    tracking = {"uri": shared_store["uri"], "artifact_root": shared_store["artifact_root"], "max_traces": 2}
    result = ragmem.evaluate(None, {"data": {"files": [{"path": str(data)}], "chunk_size": 3},
                                    "agent": {"type": "python", "target": "tests.sample_agents:sometimes_fails",
                                              "retry_backoff_s": 0.01},  # (at 0.5 s: 3 s of backoffs)
                                    "tracking": tracking, "experiment": "streamed-traces", "metrics": ["avg_latency"]})
    client = MlflowClient(shared_store["uri"])
    run = client.get_run(result.run_id)
    # (the reference "a" has no keyword: with zero_division nan, the default, the keyword judge leaves it
    # unjudged with its reason, a judge error; the two agent errors are the failed calls)
    assert run.data.metrics["count/n_traces"] == 2 and result.summary["counts"]["n_agent_errors"] == 2
    assert result.summary["n_errors"] == 3 and result.summary["counts"]["n_judge_errors"] == 1
    traces = client.search_traces(locations=[run.info.experiment_id], run_id=result.run_id)
    assert sorted(t.info.tags["ragmem.example_id"] for t in traces) == ["fail-1", "fail-2"]  # failed first, from 2 chunks
    assert run.data.metrics["count/n_examples"] == 10


def test_repeated_judge_samples_on_a_streamed_dataset_are_refused_before_any_call(tmp_path, monkeypatch):
    from ragmem.errors import ConfigError

    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    judge = {"judge": {"type": "llm", "model": "m", "base_url": "http://127.0.0.1:9/v1", "samples": 3},
             "embeddings": {"model": "e", "base_url": "http://127.0.0.1:9/v1"}}
    cfg = prepare.resolve(extra={"tracking": {"enabled": False}, **_demo(7, **judge)})
    with pytest.raises(ConfigError, match=r"judge.samples 3: the 36 examples are more than data.chunk_size 7.*"
                                          r"set data.chunk_size to 36 or more, or judge.samples to 1"):
        pipeline.load(cfg)
    assert len(pipeline.load(prepare.resolve(extra={"tracking": {"enabled": False}, **_demo(36, **judge)}))) == 36
