"""The journal's lines read back as the outputs written, whatever their values (Chinese text, a NaN, an
infinity, an integer beyond 64 bits), and writing them keeps no copy of the outputs' texts."""

from __future__ import annotations

import gc
import json
import math
import tracemalloc

from ragmem.run.journal import Journal
from ragmem.schema import AgentOutput, Context


def _outputs() -> list[AgentOutput]:
    return [
        AgentOutput("zh", "向量数据库 \"quoted\"\n", [Context("检索 text", "c1", "wiki", 0.5)], 0.25, {"retrieve": 0.1}),
        AgentOutput("failed", None, [], None, error="timeout after 2 s", attempts=3),
        AgentOutput("nan", "a", [Context("t", "c2", None, math.inf)], math.nan, {"llm": -math.inf}),
        AgentOutput("big", "b", [], 0.1, started_at_ns=2**70),
    ]


def test_each_output_reads_back_as_written_whatever_its_values(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    journal = Journal(None)
    written = _outputs()
    for output in written:
        journal.append(output)
    journal.close()
    lines = journal.path.read_bytes().splitlines()
    assert len(lines) == 4 and journal.written == 4
    assert "向量数据库".encode() in lines[0]  # UTF-8 as it is
    assert b"NaN" in lines[2] and b"Infinity" in lines[2]  # (orjson would have written null)
    assert json.loads(lines[3])["started_at_ns"] == 2**70
    read = Journal(journal.key, resume=True).outputs()
    assert list(read) == ["zh", "failed", "nan", "big"]
    for output in written:
        again = read[output.example_id]
        if output.example_id == "nan":
            assert math.isnan(again.latency_s) and again.timings_s == {"llm": -math.inf}
            assert again.contexts[0].score == math.inf
        else:
            assert again == output


def test_journaling_keeps_no_copy_of_the_texts(tmp_path, monkeypatch):
    """orjson would leave a UTF-8 copy inside each non-ASCII text it wrote (CPython caches it in the
    string), and the texts live to the run's end: 9.6 MB at 10,000 bilingual answers."""
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    outputs = [AgentOutput(f"e{i}", "检索增强生成" * 50 + str(i), [Context("向量数据库" * 60 + str(i))], 0.1)
               for i in range(500)]
    journal = Journal(None)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for output in outputs:
            journal.append(output)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        journal.close()
    assert kept < 50_000, kept  # (orjson's copies: 500 x (300 + 300) characters x 3 bytes = 900 kB)


def test_an_adopted_journal_is_written_in_the_same_lines(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    other = Journal("other")
    for output in _outputs():
        other.append(output)
    other.close()
    journal = Journal("mine")
    adopted = journal.adopt("other")
    journal.close()
    assert set(adopted) == {"zh", "nan", "big"}  # the failed call is not adopted
    assert Journal("mine", resume=True).outputs()["zh"] == _outputs()[0]
