"""Every bad input of tests/bad_inputs/cases.yaml through the command line: its exit code, one line
(click's usage block for a command-line mistake) holding the expected words, no traceback, nothing
written to the tracking store and no Prefect server started. Data files go through both ``ragmem
validate`` and ``ragmem run``: one code path, the same verdict."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, free_port
from tests.openai_stub import OtherServers, serving

CASES = yaml.safe_load((ROOT / "tests" / "bad_inputs" / "cases.yaml").read_text(encoding="utf-8"))
VALID = [{"id": f"e{i}", "query": f"Question {i}?", "reference_answer": f"Answer {i}.",
          "generated_answer": f"Answer {i}."} for i in range(3)]


_WEB: list[str] = []


def _web() -> str:
    """The base URL of the servers a judge URL may wrongly name (:class:`tests.openai_stub.OtherServers`),
    started once for the module's cases."""
    if not _WEB:
        _WEB.append(serving(OtherServers)[1])
    return _WEB[0]


def _prepare(case: dict, tmp: Path, monkeypatch) -> tuple[list[list[str]], Path | None]:
    """The command lines of a case, and its data file (None when it has none)."""
    valid = tmp / "valid.json"
    valid.write_text(json.dumps(VALID), encoding="utf-8")
    data = None
    if "data" in case or "bytes" in case:
        data = tmp / case.get("file", "data.json")
        if "bytes" in case:
            data.write_bytes(ast.literal_eval(case["bytes"]))
        else:
            data.write_text(case["data"], encoding="utf-8")
    for name, value in (case.get("env") or {}).items():  # an environment variable the user set
        monkeypatch.setenv(name, str(value))
    setup = case.get("setup")
    if setup == "folder":
        data = tmp / "a-folder"
        data.mkdir()
    elif setup == "devnull":
        data = Path("/dev/null")
    elif setup == "symlink_loop":
        (tmp / "loop_a").symlink_to(tmp / "loop_b")
        (tmp / "loop_b").symlink_to(tmp / "loop_a")
        data = tmp / "loop_a"
    elif setup == "missing":
        data = tmp / "missing.json"
    elif setup == "corrupt_store":
        (tmp / "mlruns").mkdir()
        (tmp / "mlruns" / "mlflow.db").write_bytes(b"\x89PNG\r\n not a database " * 64)
    elif setup == "bogus_tracking_uri":
        monkeypatch.setenv("MLFLOW_TRACKING_URI", "bogus://nowhere")
    elif setup == "unwritable_home":
        (tmp / "a-file").write_text("")
        monkeypatch.setenv("RAGMEM_HOME", str(tmp / "a-file" / "home"))
    elif setup == "not_locomo":
        (tmp / "notlocomo.json").write_bytes(bytes(range(128, 256)) * 8)
    elif setup == "text_store":
        (tmp / "notes.db").write_text("my notes, not a store\n", encoding="utf-8")
    elif setup == "plain_sqlite_store":
        import sqlite3

        with sqlite3.connect(tmp / "recipes.db") as db:
            db.execute("CREATE TABLE recipes (name TEXT)")
    elif setup == "nested_json":
        (tmp / "nested.json").write_text("[" * 100_000, encoding="utf-8")
    elif setup == "fifo":
        os.mkfifo(tmp / "pipe.txt")
    elif setup == "longmemeval_files":  # a question without a field, and LoCoMo's shape given as LongMemEval
        lacking = {"question_id": "q7", "question_type": "multi-session", "question": "q", "answer": "a",
                   "haystack_session_ids": [], "haystack_dates": [], "haystack_sessions": []}
        (tmp / "lacking.json").write_text(json.dumps([lacking]), encoding="utf-8")
        (tmp / "conv.json").write_text(json.dumps({"speaker_a": "A", "session_1": []}), encoding="utf-8")
    elif setup == "docs":  # a folder of one document to generate from
        (tmp / "docs").mkdir()
        (tmp / "docs" / "guide.txt").write_text("Ragmem evaluates agents. It times them and judges them.\n")
    elif setup == "metric_module":  # metrics of one's own that cannot be used
        (tmp / "mine.py").write_text("def f(example):\n    return 1.0\nnot_a_function = 3\n", encoding="utf-8")
    if "otlp" in case:  # an OTLP JSON file (data.traces.files: {tmp}/spans.json)
        (tmp / "spans.json").write_bytes(ast.literal_eval(case["otlp"]) if case["otlp"].startswith("b'")
                                         else case["otlp"].encode("utf-8"))
    if "config" in case:
        text = case["config"].replace("{web}", _web() if "{web}" in case["config"] else "").replace("{tmp}", str(tmp))
        (tmp / "case.yaml").write_text(text, encoding="utf-8")
    fill = {"{data}": str(valid), "{config}": str(tmp / "case.yaml"), "{tmp}": str(tmp),
            "{configs}": str(ROOT / "configs")}
    if "args" in case:
        args = [case["args"]]
    elif "config" in case:
        args = [["run", "{config}", "--data", "{data}"]]
    else:
        args = [["validate", str(data)], ["run", str(ROOT / "configs" / "default.yaml"), "--data", str(data)]]
    return [[fill.get(a, a) if a in fill else _fill(a, fill) for a in argv] for argv in args], data


def _fill(arg: str, fill: dict[str, str]) -> str:
    for key, value in fill.items():
        arg = arg.replace(key, value)
    return arg


def _store(tmp: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in (tmp / "mlruns").rglob("*") if p.is_file()} if (tmp / "mlruns").exists() else {}


def test_the_corpus_is_large_and_names_are_unique():
    names = [case["name"] for case in CASES]
    assert len(names) >= 60 and len(set(names)) == len(names)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_a_bad_input_is_one_line_and_its_exit_code(case, tmp_path, monkeypatch, ragmem_main):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / ".ragmem"))
    monkeypatch.setenv("RAGMEM_SERVER_HOME", str(tmp_path / "server"))
    # a Prefect API that does not answer: a case that got past validation fails loudly, starting no server
    monkeypatch.setenv("PREFECT_API_URL", f"http://127.0.0.1:{free_port()}/api")
    for name in ("MLFLOW_TRACKING_URI", "RAGMEM_TEST_UNSET_KEY"):
        monkeypatch.delenv(name, raising=False)
    commands, _ = _prepare(case, tmp_path, monkeypatch)
    before = _store(tmp_path)
    for argv in commands:
        done = ragmem_main(argv)
        code, err = done.returncode, done.stderr
        lines = err.strip().splitlines()
        where = f"{case['name']}: ragmem {' '.join(argv)}\n{err}"
        assert code == case.get("code", 2), where
        assert "Traceback" not in err and "internal error" not in err, where
        assert "event loop" not in err, where  # (no message of a library's internals)
        if case.get("usage"):
            assert lines[-1].startswith("Error:"), where
        elif argv[0] == "validate" and lines and lines[0].startswith("invalid:"):
            assert all(line.startswith("invalid:") for line in lines[:-1]) and "invalid" in lines[-1], where
        else:
            assert len(lines) == 1 and lines[0].startswith("error: "), where
        assert all(str(word) in err for word in case["words"]), where
    assert _store(tmp_path) == before  # nothing written to the tracking store
    assert not (tmp_path / "server" / "prefect").exists()  # no Prefect server was started
