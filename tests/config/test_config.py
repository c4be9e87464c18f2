"""The typed config schema: every wrong type, range or choice is one line naming the setting, before
any agent or judge is built; the documentation's settings tables agree with the schema."""

import json
import re
import typing

import pytest
import yaml

from ragmem.cli.app import main
from ragmem.config.loading import assign, DEFAULTS, resolve_config, RunConfig, STOP_WHEN_DECIDED, validate
from ragmem.config.settings import Section, Settings
from ragmem.errors import ConfigError
from tests import sample_agents
from tests.conftest import ROOT

BAD_SETTINGS = [
    ("judge.timeout_s=abc", "judge.timeout_s: expected a number > 0, got 'abc'"),
    ("judge.max_retries=many", "judge.max_retries: expected an integer between 0 and 100, got 'many'"),
    ("judge.max_concurrency=0", "judge.max_concurrency: expected an integer between 1 and 1024, got 0"),
    ("judge.threshold=2", "judge.threshold: expected a number between 0 and 1, got 2"),
    ("judge.type=gpt", "judge.type: expected one of keyword, llm, got 'gpt'"),
    ("judge.type=llm", "judge.model: required with judge.type llm"),
    ("judge.prices={m: {input: free, output: 1}}", "judge.prices.m.input: expected a number >= 0, got 'free'"),
    ("rag_metrics.threshold=high", "rag_metrics.threshold: expected a number between 0 and 1, got 'high'"),
    ("tracking.enabled='no'", "tracking.enabled: expected true or false, got 'no'"),
    ("tracking.max_traces=-1", "tracking.max_traces: expected an integer >= 0, got -1"),
    ("retriever.top_k=0", "retriever.top_k: expected an integer >= 1, got 0"),
    ("retriever.top_k=five", "retriever.top_k: expected an integer >= 1, got 'five'"),
    ("generation.tokenizer=bogus", "generation.tokenizer: expected one of jieba, rjieba, char, got 'bogus'"),
    ("keywords.stopwords=none", "keywords.stopwords: expected a list of text, got 'none'"),
    ("ranking.k=[1, 0]", "ranking.k[1]: expected an integer >= 1, got 0"),
    ("stats.confidence=1", "stats.confidence: expected a number > 0 and < 1, got 1"),
    ("agent.concurrency='4'", "agent.concurrency: expected an integer between 1 and 1024, got '4'"),
    ("agent.timeout_s=0", "agent.timeout_s: expected a number > 0 or null, got 0"),
    ("corpus.chunk_overlap=300", "corpus.chunk_overlap: must be smaller than corpus.chunk_size (200), got 300"),
    ("zero_division=2", "zero_division: expected 0, 1 or nan, got 2"),
    ("experiment=''", "experiment: expected non-empty text, got ''"),
    ("judge.treshold=0.5", "judge.treshold: unknown setting; known at this level: model, base_url"),
    ("bench.methods=[mem0]", "bench.methods[0]: expected one of reference, full_context, no_memory, got 'mem0'"),
    ("bench.limit_questions=0", "bench.limit_questions: expected an integer >= 1 or null, got 0"),
    ("sweep.grid={retriever.top_k: [1, 0]}", "sweep.grid (top_k=0): retriever.top_k: expected an integer >= 1, got 0"),
    ("sweep.objective.goal=up", "sweep.objective.goal: expected one of maximize, minimize, got 'up'"),
    ("sweep.max_parallel=0", "sweep.max_parallel: expected an integer between 1 and 64, got 0"),
]


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "data.json"
    path.write_text(json.dumps([{"query": "q1", "reference_answer": "r1"}, {"query": "q2", "reference_answer": "r2"}]))
    return path


@pytest.mark.parametrize("override, message", BAD_SETTINGS)
def test_a_bad_setting_is_one_line_and_exit_2_before_any_call(override, message, data, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    sample_agents.CALLS.clear()
    for command in ("run", "sweep"):
        extra = ["--set", "sweep.grid={retriever.top_k: [1, 2]}"] if command == "sweep" and "sweep.grid" not in override else []
        with pytest.raises(SystemExit) as exit_:
            main([command, str(ROOT / "configs" / "default.yaml"), "--data", str(data),
                  "--set", "agent.type=python", "--set", "agent.target=tests.sample_agents:Recorded",
                  *extra, "--set", override])
        err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("ragmem | ")]
        assert exit_.value.code == 2 and len(err) == 1, err
        assert err[0].startswith(f"error: {message}"), err[0]
    assert sample_agents.CALLS == []        # no agent was built, no call was made
    assert not (tmp_path / "mlruns").exists()  # no run was opened


def test_library_callers_get_the_same_messages():
    from ragmem.judges import build_judge
    from ragmem.clients.llm_client import JudgeClient
    from ragmem.text.keywords import KeywordExtractor

    with pytest.raises(ConfigError, match=r"^judge.timeout_s: expected a number > 0, got 'abc'$"):
        JudgeClient({"model": "m", "timeout_s": "abc"})
    with pytest.raises(ConfigError, match=r"^judge.threshold: expected a number between 0 and 1, got 7$"):
        build_judge({"threshold": 7}, KeywordExtractor(), 0.0)


def test_values_are_not_coerced():
    # strict types: "5" is not 5 and "no" is not false (nothing is silently converted)
    for setting in ({"seed": "5"}, {"tracking": {"enabled": "false"}}, {"judge": {"cache": 1}}):
        with pytest.raises(ConfigError):
            RunConfig.from_dict(setting)
    cfg = RunConfig.from_dict({"agent": {"timeout_s": None}, "judge": {"timeout_s": 30}})
    assert cfg.agent.timeout_s is None and cfg.judge.timeout_s == 30.0


def test_set_follows_the_schema():
    config = assign({}, ["sweep", "grid", "retriever", "top_k"], [1, 3])
    assert config == {"sweep": {"grid": {"retriever.top_k": [1, 3]}}}
    assert assign({}, ["agent", "params", "prefix"], "k") == {"agent": {"params": {"prefix": "k"}}}
    with pytest.raises(ConfigError, match="judge.threshold: is a single setting; it has no 'x'"):
        assign({}, ["judge", "threshold", "x"], 1)
    with pytest.raises(ConfigError, match="^nope: unknown setting; known at this level: corpus, retriever, memory"):
        assign({}, ["nope"], 1)


def test_resolved_config_round_trips():
    resolved = resolve_config(ROOT / "configs" / "sweep_retriever.yaml")
    assert RunConfig.from_dict(resolved).raw == resolved
    assert validate(resolved).sweep.grid["retriever.top_k"] == [1, 3, 5]
    assert resolve_config(extra={"zero_division": "nan"})["zero_division"] == "nan"


# ---- the documentation's settings tables ---------------------------------------------------------------

_ROW = re.compile(r"^\|\s*(`[^|]+`)\s*\|\s*([^|]*)\|")
_KEY = re.compile(r"^[a-z_]+(\.[a-z_]+)*$")


def _schema_default(dotted: str):
    if dotted == f"gates.{STOP_WHEN_DECIDED}":  # (a key of the gates' mapping that names no metric: the loader's)
        return RunConfig.from_dict({}).stops_when_decided
    node = DEFAULTS
    for part in dotted.split("."):
        node = node[part]
    return node


def _documented_settings():
    rows = []
    lines = [line for page in sorted((ROOT / "docs").glob("*.md")) for line in page.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        match = _ROW.match(line)
        if not match:
            continue
        keys = re.findall(r"`([^`]+)`", match.group(1))
        if not keys or not all(k.split(".")[0] in Settings.model_fields for k in keys):
            continue
        rows.append((keys, match.group(2).strip()))
    return rows


def test_every_documented_setting_exists_with_its_default():
    rows = _documented_settings()
    assert len(rows) >= 40  # the Configuration, reference agent, judge, keywords and bench tables
    checked = 0
    for keys, default_cell in rows:
        for key in keys:
            if key.endswith(".*"):
                assert key[:-2] in Settings.model_fields, key
                continue
            if ".<name>." in key:  # a setting of each entry of a {NAME: section} mapping (rubrics.<name>.scale)
                head, _, rest = key.partition(".<name>.")
                assert rest in typing.get_args(Settings.model_fields[head].annotation)[-1].model_fields, key
                continue
            assert _KEY.match(key), key
            _schema_default(key)  # raises KeyError for a documented setting that does not exist
        defaults = re.findall(r"`([^`]+)`", default_cell)
        if default_cell == "—":
            defaults = ["null"] * len(keys)
        if len(defaults) != len(keys) or any(d.startswith("$") for d in defaults) or \
                any(k.endswith(".*") or ".<name>." in k for k in keys):
            continue  # described in words (generated, all, from an environment variable)
        for key, text in zip(keys, defaults):
            assert _schema_default(key) == yaml.safe_load(text), (key, text)
            checked += 1
    assert checked >= 40


def test_every_setting_has_a_description():
    def walk(model, prefix=""):
        for name, field in model.model_fields.items():
            assert field.description, f"{prefix}{name}"
            inner = field.annotation
            if isinstance(inner, type) and issubclass(inner, Section):
                walk(inner, f"{prefix}{name}.")

    walk(Settings)


def test_configs_shipped_are_valid():
    paths = sorted((ROOT / "configs").glob("*.yaml"))
    assert len(paths) == 12
    for path in paths:
        validate(resolve_config(path))



def test_the_default_config_keeps_the_code_default_so_no_keyword_coverage_is_null_not_0(tmp_path):
    """configs/default.yaml sets no zero_division: answers without keywords give avg_coverage null
    (undefined, counted), never the 0 that ``zero_division: 0`` once printed."""
    import ragmem

    assert "zero_division" not in yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    records = [{"id": i, "query": "what is it?", "generated_answer": "the of", "reference_answer": "and the",
                "contexts": [{"text": "the and of"}]} for i in "ab"]
    result = ragmem.evaluate(records, config=str(ROOT / "configs" / "default.yaml"), track=False, journal=False)
    assert result.metrics["avg_coverage"] is None
    assert result.summary["counts"]["undefined_avg_coverage"] == 2

@pytest.mark.parametrize("argv, message", [
    (["run"], "Missing argument 'config'"),
    (["run", str(ROOT / "configs" / "demo.yaml"), "--no-such-flag"], "No such option: --no-such-flag"),
    (["serve", str(ROOT / "configs" / "demo.yaml")], "Missing option '--cron'"),
    (["compare", "--last", "many"], "Invalid value for '--last'"),
])
def test_command_line_mistakes_are_usage_errors_not_internal_errors(argv, message, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / ".ragmem"))
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and "internal error" not in err and "Traceback" not in err
    assert "Usage: ragmem " in err
    assert not (tmp_path / ".ragmem" / "last-error.log").exists()


def test_version(capsys):
    from ragmem import __version__

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"ragmem {__version__}"


def test_bare_command_shows_help_and_exits_0(capsys):
    with pytest.raises(SystemExit) as exit_:
        main([])
    captured = capsys.readouterr()
    assert exit_.value.code == 0 and "Usage: ragmem" in captured.out and captured.err == ""


@pytest.mark.parametrize("output, message", [
    ("{tmp}", "is a folder"),
    ("/proc/no/such/place/summary.json", "cannot be written"),
])
def test_output_is_checked_before_any_work(output, message, data, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    sample_agents.CALLS.clear()
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(ROOT / "configs" / "default.yaml"), "--data", str(data), "--set", "agent.type=python",
              "--set", "agent.target=tests.sample_agents:Recorded", "--output", output.format(tmp=tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(err) == 1 and err[0].startswith("error: --output") and message in err[0]
    assert sample_agents.CALLS == [] and not (tmp_path / "mlruns").exists()


def test_set_reaches_into_an_entry_of_a_named_section_mapping():
    """rubrics.<name>.x and gates.<metric>.x are settings of a named entry (a sweep grid key too),
    not one free-form key: set, validated, and an entry left incomplete named."""
    from ragmem.config.loading import resolve_config

    config = resolve_config(None, overrides=["gates.pass_rate.min=0.5", "judge.prices.m.input=1",
                                             "judge.prices.m.output=2"])
    assert config["gates"]["pass_rate"]["min"] == 0.5
    assert config["judge"]["prices"] == {"m": {"input": 1, "output": 2}}
    with pytest.raises(ConfigError, match=r"^rubrics.tone.scale: required$"):
        resolve_config(None, overrides=["rubrics.tone.criteria=Polite"])
