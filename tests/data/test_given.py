"""The Python API takes objects: records as a list of dicts, a DataFrame, a pyarrow Table or any
iterable, and a function (sync or async) as the agent; the same checks and messages as a file's and
a module:function agent's, the same numbers. Without a config it reads the home's ragmem.yaml, as
``ragmem run ragmem.yaml`` does (on the same data and home the command line gives the same numbers:
tests/e2e/test_api_and_cli.py)."""

from __future__ import annotations

import asyncio
import json
import math

import pandas as pd
import pyarrow as pa
import pytest

import ragmem
from ragmem.errors import AgentLoadError, DataError

RECORDS = [{"id": f"q{i}", "query": f"What is {i} plus {i}?", "reference_answer": f"{i} plus {i} is {2 * i}."}
           for i in range(8)]


def add(query: str) -> dict:
    """The agent: right on even numbers, wrong on odd ones, with one context."""
    n = int(query.split()[2])
    answer = f"{n} plus {n} is {2 * n if n % 2 == 0 else 2 * n + 1}."
    return {"answer": answer, "contexts": [f"{n} plus {n} is {2 * n}."]}


async def add_async(query: str) -> dict:
    await asyncio.sleep(0)
    return add(query)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ragmem.toml").write_text("")
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / ".ragmem"))
    return tmp_path


def _same(a: dict, b: dict) -> bool:
    keys = {k for k in a if "latency" not in k and not k.endswith("_seconds")}
    return all((a[k] is None and b[k] is None) or (isinstance(a[k], float) and math.isclose(a[k], b[k]))
               or a[k] == b[k] for k in keys)


def test_records_as_a_file_a_list_a_dataframe_a_table_or_a_generator_give_the_same_numbers(home):
    (home / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    (home / "agent_mod.py").write_text("from tests.data.test_given import add\n")
    from_file = ragmem.evaluate("data.jsonl", agent={"type": "python", "target": "agent_mod:add"}, track=False)
    assert from_file.metrics["pass_rate"] is not None
    for data, agent in ((RECORDS, add), (pd.DataFrame(RECORDS), add), (pa.Table.from_pylist(RECORDS), add_async),
                        ((r for r in RECORDS), add_async)):
        result = ragmem.evaluate(data, agent=agent, track=False)
        assert _same(from_file.metrics, result.metrics), type(data).__name__
        assert result.table["id"].tolist() == [r["id"] for r in RECORDS]
    assert result.summary["params"]["agent.target"] == "given:tests.data.test_given.add_async"


def test_a_missing_cell_of_a_dataframe_is_an_absent_field(home):
    frame = pd.DataFrame(RECORDS)
    frame.loc[3, "reference_answer"] = None  # a production log: some rows without a reference
    result = ragmem.evaluate(frame, agent=add, track=False)
    assert result.summary["coverage"]["token_f1"] == {"scored": 7, "of": 8}
    assert result.summary["partial"]["token_f1"] == "7 of 8 (1: no reference answer)"
    assert result.table["reference_answer"].isna().tolist() == [i == 3 for i in range(8)]


def test_a_bad_record_is_named_as_a_files_record_is(home):
    with pytest.raises(DataError) as refused:
        ragmem.evaluate([RECORDS[0], {"id": "x", "reference_answer": "r"}], agent=add, track=False)
    assert str(refused.value).startswith("the records given to ragmem.evaluate: record 2: field 'query': missing")
    with pytest.raises(DataError, match="^the records given to ragmem.evaluate: holds no records$"):
        ragmem.evaluate([], agent=add, track=False)
    with pytest.raises(DataError, match=r"record 1: field 'when': a \w+ cannot be read as data"):
        ragmem.evaluate([{**RECORDS[0], "when": object()}], agent=add, track=False)


def test_an_agent_that_is_not_callable_is_one_line(home):
    with pytest.raises(AgentLoadError, match="^agent: expected a callable .*, got int$"):
        ragmem.evaluate(RECORDS, agent=42, track=False)


def test_without_a_config_the_api_reads_the_homes_ragmem_yaml(home):
    records = [{**r, "generated_answer": add(r["query"])["answer"]} for r in RECORDS]
    plain = ragmem.evaluate(records, track=False)  # no ragmem.yaml: every default (threshold 0.7)
    (home / "ragmem.yaml").write_text("experiment: mine\njudge: {threshold: 0.05}\n")
    from_home = ragmem.evaluate(records, track=False)
    assert from_home.summary["params"]["judge.threshold"] == "0.05" and plain.summary["params"]["judge.threshold"] == "0.7"
    assert from_home.metrics["pass_rate"] > plain.metrics["pass_rate"]
