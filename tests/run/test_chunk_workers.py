"""A streamed run's chunks read where they are scored (a Dask worker: ragmem.run.batching.score_bounds),
from their bounds in the files (ragmem.data.segments), never sent as rows: each chunk the examples the
flow would have read, and the run the same as the one whose chunks the flow reads, bit for bit
(the same statistics merged in the same order). The Dask cluster itself: tests/e2e/test_dask.py."""

import codecs
import json

import pandas as pd
import pytest

from ragmem.data import segments
from ragmem.data.loaders import DataFile, load_dataset
from ragmem.run import batching, engine, prepare
from ragmem.run.journal import Journal
from ragmem.run.plain_steps import Steps
from ragmem.schema import AgentOutput
from tests.stats.test_streaming import DEMO, _generated


def _record(i: int) -> dict:
    return {"id": f"q{i}", "query": f"问题 {i}", "contexts": [f"上下文 {i}"], "generated_answer": f"答案 {i}",
            "reference_answer": f"答案 {i}"}


def _files(folder):
    """A JSONL file with a byte-order mark and blank lines, a CSV file, a Parquet file of small row
    groups, a JSONL file whose lines end in a lone carriage return and one in UTF-16."""
    jsonl = folder / "a.jsonl"
    jsonl.write_text("\ufeff" + "".join(json.dumps(_record(i), ensure_ascii=False) + ("\n\n" if i % 5 == 0 else "\n")
                                        for i in range(23)), encoding="utf-8")
    csv = folder / "b.csv"
    pd.DataFrame([{**_record(i), "contexts": json.dumps(_record(i)["contexts"], ensure_ascii=False)}
                  for i in range(100, 117)]).to_csv(csv, index=False)
    parquet = folder / "c.parquet"
    pd.DataFrame([_record(i) for i in range(200, 231)]).to_parquet(parquet, row_group_size=4)
    carriage = folder / "d.jsonl"
    carriage.write_bytes("".join(json.dumps(_record(i)) + "\r" for i in range(300, 309)).encode())
    wide = folder / "e.jsonl"
    wide.write_bytes(codecs.BOM_UTF16_LE + "".join(json.dumps(_record(i), ensure_ascii=False) + "\n"
                                                   for i in range(400, 411)).encode("utf-16-le"))
    return [DataFile(jsonl), DataFile(csv), DataFile(parquet), DataFile(carriage), DataFile(wide, encoding="utf-16")]


@pytest.mark.parametrize("size", [1, 4, 7, 23, 50])
def test_each_chunk_is_read_from_its_bounds_as_the_dataset_reads_it(tmp_path, size):
    dataset = load_dataset(_files(tmp_path), chunk_size=size)
    assert dataset.streamed and dataset.records == [23, 17, 31, 9, 11]
    bounds = segments.bounds(dataset)
    read = [[(e.id, e.source_file, e.record) for e in segments.read(b, True)] for b in bounds]
    assert read == [[(e.id, e.source_file, e.record) for e in chunk] for chunk in dataset.chunks()]
    assert [e for b in bounds for e in segments.read(b, True)] == [e for c in dataset.chunks() for e in c]
    by_file = {}
    for segment in (s for b in bounds for s in b):
        by_file.setdefault(segment.file.path.name, []).append(segment.offset)
    assert all(offset is not None for offset in by_file["a.jsonl"])  # found by byte
    assert by_file["d.jsonl"] == [None] * len(by_file["d.jsonl"])      # a lone carriage return: read from the start
    assert by_file["e.jsonl"] == [None] * len(by_file["e.jsonl"])      # UTF-16: read from the start
    assert all(offset is None for name in ("b.csv", "c.parquet") for offset in by_file[name])


def test_a_chunk_whose_file_changed_since_it_was_loaded_is_refused_with_its_record(tmp_path):
    from ragmem.errors import DataError

    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps(_record(i), ensure_ascii=False) + "\n" for i in range(10)), encoding="utf-8")
    bounds = segments.bounds(load_dataset([DataFile(path)], chunk_size=4))
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[5] = json.dumps({**_record(5), "query": None})
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="changed since it was loaded") as raised:
        segments.read(bounds[1], True)
    assert raised.value.record == 6 and raised.value.field == "query"


class OnWorkers(Steps):
    """The chunks read and scored by :func:`ragmem.run.batching.score_bounds`, one after the other, as
    the Dask workers do (without Dask: what they return is merged the same way)."""

    def __init__(self):
        self.sent = []

    def reads_chunks(self, cfg):
        return True

    def score_bounds(self, bounds, cfg, folder, key, require_answer):
        for index, chunk in enumerate(bounds):
            self.sent.append(chunk)
            yield batching.score_bounds(chunk, cfg, folder, index, key, require_answer)


def _run(config, steps, home, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(home))
    ready = prepare.for_run(prepare.resolve(None, extra={**config, "tracking": {"enabled": False}}))
    return engine.evaluate(ready.config, steps, dataset=ready.dataset, keep_journal=True)


@pytest.mark.parametrize("source", ["demo", "generated"])
def test_chunks_read_on_the_workers_give_the_flows_run_bit_for_bit(tmp_path, monkeypatch, source):
    if source == "demo":
        config = {"data": {"files": [{"path": DEMO}], "chunk_size": 7}}
    else:
        path = tmp_path / "data.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _generated(700)), encoding="utf-8")
        config = {"data": {"files": [{"path": str(path)}], "chunk_size": 150}, "judge": {"label_sample": 20},
                  "stats": {"resamples": 300}}
    flow = _run(config, Steps(), tmp_path / "flow", monkeypatch)
    workers = OnWorkers()
    batching._WORKER.clear()
    on_workers = _run(config, workers, tmp_path / "workers", monkeypatch)
    assert workers.sent and all(isinstance(s, segments.Segment) for chunk in workers.sent for s in chunk)
    folders = [tmp_path / home / "runs" / r.journal_key for home, r in (("flow", flow), ("workers", on_workers))]
    for key in ("metrics", "ci", "counts", "notes", "n_examples", "n_errors"):
        got, want = on_workers.summary[key], flow.summary[key]
        if key == "metrics":  # usage: each worker's keyword cache has its own hits
            assert 0 < got.pop("keywords_cache_hit_rate") < 1 and want.pop("keywords_cache_hit_rate")
        if key == "notes":  # the label sheet's note names the run's folder
            got = [n.replace(str(folders[1]), "<run>") for n in got]
            want = [n.replace(str(folders[0]), "<run>") for n in want]
        assert got == want, key  # ==: bit for bit
    pd.testing.assert_frame_equal(on_workers.table, flow.table)
    journaled = [[json.loads(line)["example_id"] for line in (f / "agent_outputs.jsonl").read_text().splitlines()]
                 for f in folders]
    assert journaled[1] == journaled[0] and len(journaled[0]) == flow.summary["n_examples"]  # absorbed, in order
    assert not list((folders[1] / "agent_outputs.parts").glob("*.jsonl"))
    sheets = [f / "labels_to_fill.csv" for f in folders]
    assert sheets[0].is_file() == (source == "generated")
    if sheets[0].is_file():
        assert sheets[0].read_bytes() == sheets[1].read_bytes()


def test_the_journals_of_chunks_answered_elsewhere_are_read_on_resume(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    journal = Journal("run-1")
    journal.append(AgentOutput("a", "answer a", [], 0.1))
    for index, ids in enumerate([["b", "c"], ["d"]]):
        part = Journal.part(journal.folder, index)
        for example_id in ids:
            part.append(AgentOutput(example_id, f"answer {example_id}", [], 0.1))
        part.close()
    assert list(Journal("run-1", resume=True).outputs()) == ["a", "b", "c", "d"]  # an interrupted run's resume
    journal.absorb_parts()
    journal.close()
    assert [json.loads(line)["example_id"] for line in journal.path.read_text().splitlines()] == ["a", "b", "c", "d"]
    assert list(Journal("run-1", resume=True).outputs()) == ["a", "b", "c", "d"]


def test_an_interrupted_streamed_run_resumes_from_its_journal_and_ends_as_an_uninterrupted_one(tmp_path, monkeypatch):
    import ragmem
    from ragmem.runtime import interrupts
    from tests import sample_agents

    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "query": f"问题 {i}", "reference_answer": f"answer to 问题 {i % 7}"},
                                       ensure_ascii=False) + "\n" for i in range(60)), encoding="utf-8")
    config = {"data": {"files": [{"path": str(data)}], "chunk_size": 20},
              "agent": {"type": "python", "target": "tests.sample_agents:StopsAfter", "batch_size": 5},
              "orchestration": {"workers": 1}}  # no process pool to start three times
    sample_agents.StopsAfter.calls = 0
    try:
        with pytest.raises(KeyboardInterrupt) as caught:
            ragmem.evaluate(None, config, track=False)
    finally:
        interrupts.STOP.clear()
    key, done, total = caught.value.ragmem_progress
    assert total == 60 and 20 < done < 60 and sample_agents.StopsAfter.calls == done  # into the second chunk
    resumed = ragmem.evaluate(None, config, track=False, resume=key, journal=True)
    assert sample_agents.StopsAfter.calls == 60  # the answered ones were not asked again
    sample_agents.StopsAfter.calls = -10**6       # an uninterrupted run: never stopped
    whole = ragmem.evaluate(None, config, track=False)
    timing = ("latency", "avg_latency", "keywords_cache_hit_rate")
    assert {k: v for k, v in resumed.metrics.items() if not k.startswith(timing)} == \
        {k: v for k, v in whole.metrics.items() if not k.startswith(timing)}
    assert resumed.summary["counts"] == whole.summary["counts"] and resumed.summary["n_examples"] == 60
    pd.testing.assert_frame_equal(resumed.table.drop(columns=["latency_s"]), whole.table.drop(columns=["latency_s"]),
                                  check_like=True)


def test_a_resume_adds_the_journals_of_chunks_answered_on_workers_to_the_runs_own(tmp_path, monkeypatch):
    """A run stopped while its Dask workers journaled chunks: its resume (which reads its chunks in
    the flow) starts from one journal, the one it logs at the end."""
    from ragmem.run import resume as resumes

    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(_record(i), ensure_ascii=False) + "\n" for i in range(30)), encoding="utf-8")
    cfg = prepare.resolve(None, extra={"data": {"files": [{"path": str(data)}], "chunk_size": 10},
                                       "tracking": {"enabled": False}})
    dataset = prepare.for_run(cfg).dataset
    journal = Journal("untracked-stopped")
    journal.write_meta({"config": resumes.compared_config(cfg), "data.sha256": dataset.sha256})  # as the engine does
    journal.append(AgentOutput("q0", "answer", [], 0.1))
    part = Journal.part(journal.folder, 1)
    part.append(AgentOutput("q12", "answer", [], 0.1))
    part.close()
    journal.close()
    resumed = resumes.check_resume(cfg, dataset, "untracked-stopped")
    resumed.close()
    assert [json.loads(line)["example_id"] for line in resumed.path.read_text().splitlines()] == ["q0", "q12"]
    assert not list((resumed.folder / "agent_outputs.parts").glob("*.jsonl"))
