"""``ragmem generate`` writing questions with an LLM, against the scripted endpoint of
tests.testsets.scripted served over HTTP (tests.openai_stub.Stub, the real openai client): the
requested mix is met, the documents planted to fail the language, duplicate, grounded and answerable
checks are dropped and counted by reason (the side file, the lines printed and the MLflow run agree),
a rerun sends 0 requests, the file runs through ``ragmem validate`` and an evaluation unchanged; and,
as a real process, Ctrl+C then ``--resume`` pays no request twice (with ``judge.cache`` off: the
command's own replies file), giving the file an uninterrupted run gives."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import pytest

import ragmem
from ragmem.config.generate_settings import GenerateSettings
from ragmem.testsets import documents, plan
from ragmem.testsets.writing import Writer
from ragmem.text.keywords import KeywordExtractor
from tests.conftest import interrupted_when
from tests.openai_stub import Stub, user_text
from tests.testsets import scripted
from tests.testsets.test_writing import InProcess

pytestmark = pytest.mark.e2e

MIX = {"single_hop": 0.5, "multi_hop": 0.15, "comparison": 0.1, "unanswerable": 0.25}
QUOTAS = {"single_hop": 10, "multi_hop": 3, "comparison": 2, "unanswerable": 5}


def _config(tmp_path, stub, **judge) -> str:
    path = tmp_path / "generate.yaml"
    path.write_text(json.dumps({
        "judge": {"type": "llm", "model": "writer-test", "base_url": stub.base_url, "retry_backoff_s": 0.01,
                  "cache_dir": str(tmp_path / "cache"), **judge},
        "generate": {"n": 20, "mix": MIX, "oversample": 4}}), encoding="utf-8")
    return str(path)


def _rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_mix_is_met_planted_failures_are_dropped_by_reason_and_a_rerun_asks_nothing(tmp_path, ragmem_main,
                                                                                          shared_store):
    from mlflow import MlflowClient

    corpus = tmp_path / "corpus.json"  # a corpus JSON: the reference agent reads the same documents
    corpus.write_text(json.dumps({"documents": [{"id": k, "text": v} for k, v in
                                                {**scripted.ENGLISH, **scripted.CHINESE}.items()]}), encoding="utf-8")
    out = tmp_path / "t.jsonl"
    env = {**os.environ, "MLFLOW_TRACKING_URI": shared_store["uri"]}
    with Stub(chat=scripted.chat) as stub:
        command = ["generate", str(corpus), "--config", _config(tmp_path, stub), "-o", str(out), "--experiment", "gen-llm"]
        done = ragmem_main(command, cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        sent = len(stub.requests)
        rows = _rows(out)
        assert collections.Counter(r["question_type"] for r in rows) == QUOTAS  # the mix, met
        side = _rows(tmp_path / "t.dropped.jsonl")
        reasons = collections.Counter(r["reason"] for r in side)
        planted = {(r["type"], r["chunks"][0]): r["reason"] for r in side}
        assert planted[("single_hop", "lang#c0")] == "language" and planted[("single_hop", "ground#c0")] == "grounded"
        assert planted[("single_hop", "dup2#c0")] == "duplicate" and planted[("single_hop", "unans#c0")] == "answerable"
        assert planted[("unanswerable", "trap#c0")] == "answerable"
        text = " ".join(done.stdout.split())
        assert planted[("single_hop", "self#c0")] == "standalone"
        for check in ("language", "standalone", "duplicate", "grounded", "answerable"):
            assert f"{check}: " in text and f"{reasons[check]} dropped" in text.split(f"{check}: ", 1)[1][:60]
        assert f"{len(side)} not kept, each with its reason, in {tmp_path / 't.dropped.jsonl'}" in text
        assert f"judge: {sent} requests sent, 0 replies from the cache" in text
        client = MlflowClient(shared_store["uri"])
        (run,) = client.search_runs([client.get_experiment_by_name("gen-llm").experiment_id])
        assert run.data.params["mode"] == "llm" and run.data.params["generate.checks"] == "language,standalone,duplicate,grounded,answerable"
        assert run.data.metrics["count/n_questions"] == 20 and run.data.metrics["count/n_dropped_grounded"] == reasons["grounded"]
        assert sorted(a.path for a in client.list_artifacts(run.info.run_id)) == ["t.dropped.jsonl", "t.jsonl"]
        first = out.read_bytes()
        again = ragmem_main(command[:-2] + ["--no-track"], cwd=tmp_path, env=env)  # a rerun: every reply cached
        assert again.returncode == 0, again.stderr
        assert len(stub.requests) == sent
        assert "judge: 0 requests sent" in again.stdout and out.read_bytes() == first
        bad = tmp_path / "bad"  # documents whose every question fails a check: no test set, exit 3
        bad.mkdir()
        for name in ("lang", "self"):
            (bad / f"{name}.txt").write_text(scripted.ENGLISH[name], encoding="utf-8")
        none = ragmem_main(["generate", str(bad), "--config", command[3], "-o", str(tmp_path / "none.jsonl"), "--n", "2",
                            "--set", "generate.mix={single_hop: 1.0}", "--no-track"], cwd=tmp_path, env=env)
        assert none.returncode == 3 and not (tmp_path / "none.jsonl").exists()
        assert "no question kept: all 2 candidates were dropped, each with its reason" in " ".join(none.stdout.split())
        assert none.stderr.strip().splitlines()[-1] == (
            f"error: generate: no question passed its checks (2 candidates; {tmp_path / 'none.dropped.jsonl'} says why "
            f"each was dropped); {tmp_path / 'none.jsonl'} not written")
    assert all(r["provenance"]["model"] == "writer-test" and r["provenance"]["checks"]["answerable"].startswith("pass")
               for r in rows)
    valid = ragmem_main(["validate", str(out), "--no-answer"], cwd=tmp_path)
    assert valid.returncode == 0 and "20 records, all valid" in valid.stdout + valid.stderr
    result = ragmem.evaluate(str(out), track=False, agent={"type": "reference"}, corpus={"path": str(corpus)},
                             stats={"resamples": 0}, metrics=["hit_rate_at_k", "mrr_at_k", "pass_rate"])
    assert result.metrics["hit_rate_at_5"] is not None and result.metrics["pass_rate"] is not None
    assert result.summary["n_examples"] == 20


def test_ctrl_c_then_resume_pays_no_request_twice_and_gives_the_uninterrupted_file(tmp_path, ragmem_main):
    corpus = scripted.write_corpus(tmp_path / "docs")
    with Stub(chat=scripted.chat, latency_s=0.05) as stub:
        config = _config(tmp_path, stub, cache=False, max_concurrency=2)
        command = [sys.executable, "-m", "ragmem.cli", "generate", str(corpus), "--config", config, "-o", "t.jsonl",
                   "--no-track"]
        env = {**os.environ, "RAGMEM_PROGRESS": "log", "RAGMEM_PROGRESS_INTERVAL": "0.2"}  # (lines before the 30th request)
        first = interrupted_when(command, lambda: len(stub.requests) >= 30, "30 requests", env, tmp_path)
        err = first.stderr
        assert first.returncode == 130, err
        last = err.strip().splitlines()[-1]
        assert last.startswith("interrupted: ") and "answered and kept" in last
        assert "llm write_" in err and "ETA" in err  # progress while it writes
        assert last.endswith(f"go on with: ragmem generate {corpus} --config {config} -o t.jsonl --no-track --resume")
        assert (tmp_path / ".t.jsonl.generate.json").is_file() and (tmp_path / ".t.jsonl.generate-cache").is_dir()
        asked_first = [user_text(r) for r in stub.requests]
        second = subprocess.run(command + ["--resume"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert second.returncode == 0, second.stderr
        assert "resuming the interrupted generate of t.jsonl" in second.stdout
        asked_second = [user_text(r) for r in stub.requests[len(asked_first):]]
        assert asked_second and not set(asked_second) & set(asked_first)  # nothing paid for twice
        assert not (tmp_path / ".t.jsonl.generate.json").exists() and not (tmp_path / ".t.jsonl.generate-cache").exists()
    nothing = ragmem_main(command[3:] + ["--resume"], cwd=tmp_path)
    assert nothing.returncode == 2 and "--resume: no interrupted generate of t.jsonl" in nothing.stderr
    read = documents.read_corpus(corpus)  # the uninterrupted run: the same scripted replies, in this process
    settings = GenerateSettings(n=20, mix=MIX, oversample=4.0)
    whole = Writer(InProcess(), read.chunks, KeywordExtractor(), settings, seed=0).run(plan.quotas(20, MIX))
    resumed = _rows(tmp_path / "t.jsonl")
    assert [(r["query"], r["question_type"]) for r in resumed] == [(w.question, w.candidate.type) for w in whole.kept]


def test_four_questions_with_the_default_mix_leave_a_type_at_0_and_are_written(tmp_path, ragmem_main):
    """Issue 60, point 6: ``ragmem generate docs/ --n 4`` with an LLM endpoint. The default mix gives
    2/1/1/0 at n=4: the type whose quota is 0 has no stream and asks nothing (was: KeyError)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in {**scripted.ENGLISH, **scripted.CHINESE}.items():
        (docs / f"{name}.txt").write_text(text, encoding="utf-8")
    out = tmp_path / "t.jsonl"
    with Stub(chat=scripted.chat) as stub:
        config = tmp_path / "judge.yaml"
        config.write_text(json.dumps({"judge": {"type": "llm", "model": "writer-test", "base_url": stub.base_url,
                                                "retry_backoff_s": 0.01, "cache_dir": str(tmp_path / "cache")}}))
        done = ragmem_main(["generate", str(docs), "--n", "4", "--config", str(config), "-o", str(out), "--no-track"],
                           cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = _rows(out)
    assert len(rows) == 4 and "unanswerable" not in {r["question_type"] for r in rows}
    assert "4 questions: 2 single_hop, 1 multi_hop, 1 comparison (generate.mix)" in " ".join(done.stdout.split())
