"""Every format and field-name set loads to the same examples; bad records are named precisely."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from ragmem.data.checking import check_file
from ragmem.data.loaders import DataFile, load_dataset
from ragmem.errors import DataError

RECORDS = [
    {"id": "a", "query": "向量数据库有什么作用？", "context": ["向量数据库存储embedding", "支持近似最近邻搜索"],
     "generated_answer": "存储embedding", "reference_answer": "向量数据库存储embedding", "label": 1,
     "latency_ms": 120.5},
    {"id": "b", "query": "What is BM25?", "context": ["BM25 is a sparse ranking function"],
     "generated_answer": "A ranking function", "reference_answer": "A sparse ranking function", "label": 0},
]

ALIASES = {
    "ragmem": {"query": "query", "context": "context", "generated_answer": "generated_answer",
               "reference_answer": "reference_answer"},
    "ragas": {"query": "user_input", "context": "retrieved_contexts", "generated_answer": "response",
              "reference_answer": "reference"},
    "ragas-legacy": {"query": "question", "context": "contexts", "generated_answer": "answer",
                     "reference_answer": "ground_truth"},
    "deepeval": {"query": "input", "context": "retrieval_context", "generated_answer": "actual_output",
                 "reference_answer": "expected_output"},
}


def _renamed(names):
    return [{names.get(k, k): v for k, v in r.items()} for r in RECORDS]


def _write(tmp_path, fmt, records):
    path = tmp_path / f"data.{fmt}"
    if fmt == "json":
        path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    elif fmt == "jsonl":
        path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records), encoding="utf-8")
    else:
        frame = pd.DataFrame(records)
        if fmt == "csv":
            for column in frame.columns:  # lists are stored as JSON in CSV cells
                frame[column] = frame[column].map(
                    lambda v: json.dumps(v, ensure_ascii=False) if isinstance(v, list) else v)
            frame.to_csv(path, index=False)
        else:
            frame.to_parquet(path)
    return path


def _key(example):
    return (example.id, example.query, [c.text for c in example.contexts], example.generated_answer,
            example.reference_answer, example.label, example.latency_ms)


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv", "parquet"])
@pytest.mark.parametrize("alias", list(ALIASES))
def test_every_format_and_alias_set_loads_the_same(tmp_path, fmt, alias):
    (tmp_path / "ref").mkdir()
    reference = load_dataset([DataFile(_write(tmp_path / "ref", "json", RECORDS))])
    loaded = load_dataset([DataFile(_write(tmp_path, fmt, _renamed(ALIASES[alias])))])
    assert [_key(e) for e in loaded.examples] == [_key(e) for e in reference.examples]
    assert loaded.examples[0].latency_ms == 120.5 and loaded.examples[1].latency_ms is None


def test_seed_two_file_layout(seed_dir):
    dataset = load_dataset([DataFile(seed_dir / "evaluation_samples_true.json", 1),
                            DataFile(seed_dir / "evaluation_samples_false.json", 0)])
    assert len(dataset) == 16
    assert [e.label for e in dataset.examples] == [1] * 8 + [0] * 8
    assert len({e.id for e in dataset.examples}) == 16
    assert len(dataset.sha256) == 64


def test_context_objects_and_optional_fields(tmp_path):
    record = {"query": "q", "reference_answer": "r", "generated_answer": "g", "label": "true",
              "context": [{"text": "t1", "id": 7, "source": "memory_long", "score": 0.5}, "t2"],
              "timings_ms": {"retrieve": 12, "llm": 300}, "session_id": "s1",
              "history": [{"role": "user", "content": "hi"}], "relevant_context_ids": [7]}
    (example,) = load_dataset([DataFile(_write(tmp_path, "json", [record]))]).examples
    assert example.contexts[0].id == "7" and example.contexts[0].source == "memory_long"
    assert example.contexts[1].source is None and example.label == 1
    assert example.timings_ms == {"retrieve": 12.0, "llm": 300.0} and example.relevant_context_ids == ["7"]
    assert example.id == "data:1"  # file stem + 1-based record number when no id is given


BAD_RECORDS = [
    ({"reference_answer": "r", "generated_answer": "g"}, "record 1: field 'query': missing"),
    ({"query": "q", "reference_answer": "r"}, "record 1: field 'generated_answer': missing"),
    ({"query": "q", "reference_answer": [], "generated_answer": "g"}, "field 'reference_answer': expected a string"),
    ({"query": 3.5, "reference_answer": "r", "generated_answer": "g"},
     "field 'query': expected a string, got the number 3.5 (data.coerce_numbers: true reads numbers as text)"),
    ({"query": float("nan"), "reference_answer": "r", "generated_answer": "g"}, "field 'query': expected a string, got NaN"),
    ({"query": "q", "reference_answer": "r", "generated_answer": float("inf")},
     "field 'generated_answer': expected a string, got Infinity"),
    ({"query": "q", "reference_answer": "r", "generated_answer": "g", "contexts": "not a list"},
     "field 'contexts': expected a list of strings or objects, got a string"),
    ({"query": "q", "reference_answer": "r", "generated_answer": "g", "contexts": ["ok", 7]},
     "field 'contexts[1]': expected a string, got the number 7"),
    ({"query": "q", "reference_answer": "r", "generated_answer": "g", "id": 1.5}, "field 'id': expected a string or an integer id"),
    ({"query": "q", "reference_answer": "r", "generated_answer": "g", "relevant_context_ids": [None]},
     "field 'relevant_context_ids[0]': expected a string or an integer id, got null"),
    ({"query": "q", "reference_answer": "r", "generated_answer": "g", "context": 5}, "field 'context': expected a list"),
    ({"query": "q", "reference_answer": "r", "generated_answer": "g", "context": [{"id": 1}]},
     "field 'context[0]': object needs a string 'text'"),
    ({"query": "q", "reference_answer": "r", "generated_answer": "g", "context": [{"text": "t", "source": "web"}]},
     "field 'context[0].source': 'web' is not one of rag, memory_short, memory_long"),
    ({"query": "q", "reference_answer": "r", "generated_answer": "g", "label": "maybe"}, "field 'label'"),
    ({"query": "q", "reference_answer": "r", "generated_answer": "g", "latency_ms": -1}, "field 'latency_ms'"),
    ({"query": "q", "answer": "a", "response": "b", "reference": "r"}, "field 'answer': conflicts with 'response'"),
    ("just a string", "record 1: expected an object"),
]


@pytest.mark.parametrize("record, message", BAD_RECORDS)
def test_bad_record_names_file_record_and_field(tmp_path, record, message):
    path = _write(tmp_path, "json", [record])
    with pytest.raises(DataError) as info:
        load_dataset([DataFile(path)])
    assert str(path) in str(info.value) and message in str(info.value)


def test_validation_reports_every_problem(tmp_path):
    good = RECORDS[0]
    path = _write(tmp_path, "json", [good, {"query": "q"}, good | {"id": "c", "label": 3}])
    report = check_file(DataFile(path))
    assert report.n_records == 3
    assert [(p.record, p.field) for p in report.problems] == [(2, "generated_answer"), (3, "label")]


@pytest.mark.parametrize("content, suffix, message", [
    ("[{", ".json", "not valid JSON"),
    ('{"a": 1}', ".json", "expected a JSON list"),
    ("[]", ".json", "holds no records"),
    ("{}\n{bad", ".jsonl", "line 2 is not valid JSON"),
    ("x", ".txt", "cannot tell the format"),
])
def test_unreadable_files(tmp_path, content, suffix, message):
    path = tmp_path / f"d{suffix}"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        load_dataset([DataFile(path)])


def test_missing_file_and_label_conflict_and_duplicates(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        load_dataset([DataFile(tmp_path / "nope.json")])
    path = _write(tmp_path, "json", RECORDS)
    with pytest.raises(DataError, match="record 2: field 'label': is 0 but the file is labelled 1"):
        load_dataset([DataFile(path, label=1)])
    with pytest.raises(DataError, match="duplicate id 'a'"):
        load_dataset([DataFile(path), DataFile(path)])


def test_live_agent_does_not_need_answers(tmp_path):
    path = _write(tmp_path, "json", [{"query": "q", "reference_answer": "r"}])
    (example,) = load_dataset([DataFile(path)], require_answer=False).examples
    assert example.generated_answer is None


def test_numbers_are_read_as_text_only_when_asked(tmp_path):
    path = _write(tmp_path, "json", [{"query": "q", "reference_answer": 42.0, "generated_answer": 42}])
    with pytest.raises(DataError, match="got the number 42.0"):
        load_dataset([DataFile(path)])
    example = load_dataset([DataFile(path, coerce_numbers=True)]).examples[0]
    assert (example.reference_answer, example.generated_answer) == ("42.0", "42")  # their JSON text, as written


def test_a_csv_cell_of_plain_text_is_one_context(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text('query,reference_answer,generated_answer,context\nq,r,g,just one passage\n', encoding="utf-8")
    assert [c.text for c in load_dataset([DataFile(path)]).examples[0].contexts] == ["just one passage"]


def test_a_path_that_is_not_a_data_file_is_named_as_such(tmp_path):
    (tmp_path / "loop_a").symlink_to(tmp_path / "loop_b")
    (tmp_path / "loop_b").symlink_to(tmp_path / "loop_a")
    cases = {tmp_path: "is a folder; name a data file", Path("/dev/null"): "is not a regular file",
             tmp_path / "missing.json": "file not found", tmp_path / "loop_a": "a symlink to nothing (or a loop)"}
    for path, message in cases.items():
        with pytest.raises(DataError, match=re.escape(message)):
            load_dataset([DataFile(path)])


def test_text_that_is_not_utf8_is_named_by_line(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_bytes(b'{"query": "q", "reference_answer": "r", "generated_answer": "g"}\n{"query": "\xff"}\n')
    with pytest.raises(DataError, match=r"not UTF-8 text \(line 2: byte 0xff at offset 76\)"):
        load_dataset([DataFile(path)])


def test_a_gbk_csv_from_excel_is_named_and_read_with_data_encoding(tmp_path):
    """Excel saves a Chinese CSV as GBK: the UTF-8 error names data.encoding; with it the file reads."""
    from ragmem.config.loading import validate
    from ragmem.errors import ConfigError

    path = tmp_path / "excel.csv"
    path.write_bytes("query,reference_answer,generated_answer\n什么是检索？,先检索再生成,先检索后生成\n".encode("gbk"))
    with pytest.raises(DataError, match=r"not UTF-8 text \(line 2: .*set data.encoding, e.g. data.encoding: gb18030"):
        load_dataset([DataFile(path)])
    dataset = load_dataset([DataFile(path, encoding="gb18030")])
    assert dataset.examples[0].query == "什么是检索？" and dataset.examples[0].reference_answer == "先检索再生成"
    with pytest.raises(DataError, match=r"not ascii text .*check data.encoding"):
        load_dataset([DataFile(path, encoding="ascii")])
    cfg = validate({"data": {"files": [str(path)], "encoding": "gb18030"}})
    assert [f.encoding for f in cfg.files] == ["gb18030"]
    with pytest.raises(ConfigError, match="data.encoding: unknown text encoding 'gbk2'"):
        validate({"data": {"files": [str(path)], "encoding": "gbk2"}})


def test_lone_surrogates_and_control_characters_are_named_where_they_enter(tmp_path):
    """A lone surrogate (a JSON ``\\ud800``) cannot be written as UTF-8: refused in any text and id,
    with its record and field; a control character is refused in an id (NUL included), kept in a text
    (and shown as its picture in report.html)."""
    from ragmem.data.checking import check_file
    from ragmem.data.loaders import DataFile, load_dataset
    from ragmem.errors import DataError
    from ragmem.report.html import _e

    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "q1", "query": "ok", "reference_answer": "r", "generated_answer": "a"}\n'
                    '{"id": "q\\ud800", "query": "ok", "reference_answer": "r", "generated_answer": "a"}\n'
                    '{"id": "q3", "query": "half \\udc00 pair", "reference_answer": "r", "generated_answer": "a"}\n'
                    '{"id": "q\\u0000", "query": "ok", "reference_answer": "r", "generated_answer": "a"}\n'
                    '{"id": "q5", "query": "a NUL \\u0000 in a text", "reference_answer": "r", "generated_answer": "a"}\n',
                    encoding="utf-8")
    report = check_file(DataFile(path))
    found = [(p.record, p.field, p.detail) for p in report.problems]
    assert found == [(2, "id", "U+D800 at character 2: an id is printable text (no control character, no lone surrogate)"),
                     (3, "query", "a lone surrogate U+DC00 at character 6: not Unicode text (a JSON \\u escape of half "
                                  "a character pair?)"),
                     (4, "id", "U+0000 at character 2: an id is printable text (no control character, no lone surrogate)")]
    assert [e.id for e in report.examples] == ["q1", "q5"] and report.examples[1].query == "a NUL \x00 in a text"
    with pytest.raises(DataError) as refused:  # a run refuses the file at load, before any call
        load_dataset([DataFile(path)])
    assert refused.value.record == 2 and refused.value.field == "id"
    assert _e("a NUL \x00 and a bell \x07, a\ttab") == "a NUL \u2400 and a bell \u2407, a\ttab"

    csv_path = tmp_path / "bad.csv"  # a CSV cell: the same rule for an id
    csv_path.write_text("id,query,reference_answer,generated_answer\nq\x01,ok,r,a\n", encoding="utf-8")
    (problem,) = check_file(DataFile(csv_path)).problems
    assert (problem.record, problem.field) == (1, "id") and problem.detail.startswith("U+0001 at character 2")


def test_validate_streams_holds_no_example_and_still_names_every_id_given_twice(tmp_path):
    """``ragmem validate`` reads a file a batch at a time and keeps no example (a 1 GB JSONL of
    1.65M records: 266 MB peak, 27 s); an id given again is named on the record that repeats it,
    with the record that gave it first, as when every example was held."""
    from ragmem.data.checking import check_file

    path = tmp_path / "d.jsonl"
    rows = [{"id": f"q{i % 25_000}" if i not in (30_000, 30_001) else "q7", "query": "q", "reference_answer": "r",
             "generated_answer": "a"} for i in range(25_000)] + \
           [{"id": "q7", "query": "q", "reference_answer": "r", "generated_answer": "a"},
            {"id": "q24999", "query": "q", "reference_answer": "r", "generated_answer": "a"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    batches = []
    report = check_file(DataFile(path), keep=False, on_batch=batches.append)
    assert report.examples == [] and report.n_records == 25_002 and sum(batches) == 25_002 and len(batches) == 3
    assert [(p.record, p.field, p.detail) for p in report.problems] == [
        (25_001, "id", "duplicate id 'q7' (also record 8)"), (25_002, "id", "duplicate id 'q24999' (also record 25000)")]
    held = check_file(DataFile(path))  # holding the examples: the same problems
    assert [(p.record, p.detail) for p in held.problems] == [(p.record, p.detail) for p in report.problems]


@pytest.mark.parametrize("reference", ["absent", None, "", "   "])
def test_a_record_without_a_reference_answer_is_valid_and_has_none(tmp_path, reference):
    """Production traffic has no reference (absent, null or blank): the metrics that need one say so
    (ragmem.metrics.needs)."""
    record = {"query": "q", "generated_answer": "g"}
    if reference != "absent":
        record["reference_answer"] = reference
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(record) + "\n")
    (example,) = load_dataset([DataFile(path)]).examples
    assert example.reference_answer is None
