"""Timing live Python agents: order, concurrency, failures, timeouts, malformed replies."""

import pytest

from ragmem.agents import build_agent
from ragmem.agents.runner import parse_reply, run_live
from ragmem.errors import AgentLoadError, ConfigError
from ragmem.schema import Example


def ex(i, query, **kw):
    return Example(id=str(i), query=query, reference_answer="r", **kw)


def test_function_agent_with_contexts_and_timings():
    agent = build_agent({"agent": {"type": "python", "target": "tests.sample_agents:echo"}})
    (out,) = run_live(agent, [ex(1, "hello")])
    assert out.answer == "hello" and out.contexts[0].source == "rag" and out.error is None
    assert out.timings_s == {"retrieve": 0.001, "llm": 0.002}
    # measured with a monotonic clock (a number, never a missing value), the stages as reported
    assert isinstance(out.latency_s, float) and out.started_at_ns is not None
    assert out.timings_s == {"retrieve": 0.001, "llm": 0.002}


def test_session_and_history_are_passed_when_accepted():
    agent = build_agent({"agent": {"type": "python", "target": "tests.sample_agents:with_history"}})
    (out,) = run_live(agent, [ex(1, "q", session_id="s9", history=[{"role": "user", "content": "a"}])])
    assert out.answer == "s9:1:q"


def test_class_agent_is_built_once_with_params():
    agent = build_agent({"agent": {"type": "python", "target": "tests.sample_agents:Counter", "params": {"prefix": "k"}}})
    outs = run_live(agent, [ex(i, "q") for i in range(3)])
    assert [o.answer for o in outs] == ["k1", "k2", "k3"]


def test_failures_are_recorded_per_example_and_the_rest_go_on():
    agent = build_agent({"agent": {"type": "python", "target": "tests.sample_agents:sometimes_fails"}})
    queries = ["ok1", "fail", "slow", "bad", "ok2"]
    outs = run_live(agent, [ex(i, q) for i, q in enumerate(queries)], concurrency=2, timeout_s=0.5)
    assert [o.example_id for o in outs] == ["0", "1", "2", "3", "4"]
    assert outs[0].answer == "ok1" and outs[0].contexts[0].text == "ctx ok1"
    assert outs[1].error == "RuntimeError: backend unavailable"
    assert outs[2].error.startswith("timeout") and outs[2].latency_s == 0.5
    assert outs[3].error.startswith("malformed reply: answer must be a string")
    assert outs[4].answer == "ok2" and outs[4].error is None


def test_concurrency_keeps_input_order():
    agent = build_agent({"agent": {"type": "python", "target": "tests.sample_agents:jittery"}})
    outs = run_live(agent, [ex(i, f"q{i}") for i in range(40)], concurrency=8)
    assert [o.answer for o in outs] == [f"q{i}" for i in range(40)]


@pytest.mark.parametrize("reply, expected", [
    ("plain", ("plain", [], {})),
    (("a", ["c"]), ("a", ["c"], {})),
    ({"answer": "a", "contexts": [{"text": "t", "id": 1}], "timings": {"llm": 1}}, ("a", ["t"], {"llm": 1.0})),
])
def test_reply_shapes(reply, expected):
    answer, contexts, timings = parse_reply(reply)
    assert (answer, [c.text for c in contexts], timings) == expected


@pytest.mark.parametrize("settings, error, message", [
    ({"type": "python"}, ConfigError, "agent.target: required"),
    ({"type": "python", "target": "nocolon"}, AgentLoadError, "expected 'module:function'"),
    ({"type": "python", "target": "no_such_module_xyz:f"}, AgentLoadError, "cannot import module"),
    ({"type": "python", "target": "tests.sample_agents:missing"}, AgentLoadError, "has no attribute"),
    ({"type": "python", "target": "tests.sample_agents:echo", "params": {"a": 1}}, AgentLoadError, "only a class"),
    ({"type": "martian"}, ConfigError, "agent.type: expected one of replay, python, http, reference, got .martian."),
])
def test_agent_spec_errors(settings, error, message):
    with pytest.raises(error, match=message):
        build_agent({"agent": settings})


@pytest.mark.parametrize("reply, message", [
    ("half \ud800", r"answer: a lone surrogate U\+D800 at character 6"),
    ({"answer": "a \udfff"}, r"answer: a lone surrogate U\+DFFF at character 3"),
    (("a", ["ok", "bad \udc00"]), r"contexts\[1\]\.text: a lone surrogate U\+DC00"),
    ({"answer": "a", "contexts": [{"text": "t", "id": "c\ud801"}]}, r"contexts\[0\]\.id: a lone surrogate U\+D801"),
    ({"answer": "a", "contexts": [{"text": "t", "source": "\udbff"}]}, r"contexts\[0\]\.source: a lone surrogate"),
    ({"answer": "a", "timings": {"ll\udc80m": 1}}, r"timings stage 'll\\\\udc80m': a lone surrogate U\+DC80"),
])
def test_a_reply_no_file_can_hold_is_malformed_naming_its_field(reply, message):
    with pytest.raises(ValueError, match=message):
        parse_reply(reply)


def test_lone_surrogates_in_replies_and_failures_are_each_that_examples_error_and_the_run_goes_on(tmp_path):
    """Before: the journal could not write such an answer, the worker thread died with it, and the run
    waited for ever for that example."""
    import json

    agent = build_agent({"agent": {"type": "python", "target": "tests.sample_agents:half_pairs"}})
    journal = tmp_path / "outputs.jsonl"

    def keep(output):  # as the run's journal keeps each output: UTF-8, one line each
        with open(journal, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"id": output.example_id, "answer": output.answer, "error": output.error},
                                    ensure_ascii=False) + "\n")

    queries = ["answer", "context", "stage", "raise", "ok"]
    outs = _within(120, lambda: run_live(agent, [ex(i, q) for i, q in enumerate(queries)], concurrency=2, on_output=keep))
    assert [o.example_id for o in outs] == ["0", "1", "2", "3", "4"]
    assert outs[0].error.startswith("malformed reply: answer: a lone surrogate U+D800")
    assert outs[1].error.startswith("malformed reply: contexts[0].text: a lone surrogate U+D83D")
    assert outs[2].error.startswith("malformed reply: timings stage")
    assert outs[3].error == "RuntimeError: upstream said \\udc9f"  # shown, never a character no file holds
    assert outs[4].answer == "fine 检索" and outs[4].contexts[0].text == "whole 😀" and outs[4].error is None
    assert len(journal.read_text(encoding="utf-8").splitlines()) == 5


def test_an_output_that_cannot_be_kept_stops_the_run_with_its_error_instead_of_waiting_for_ever():
    agent = build_agent({"agent": {"type": "python", "target": "tests.sample_agents:echo"}})
    kept = []

    def keep(output):
        if output.example_id == "3":
            raise OSError(28, "No space left on device")
        kept.append(output.example_id)

    raised = _within(120, lambda: run_live(agent, [ex(i, f"q{i}") for i in range(8)], concurrency=2, on_output=keep))
    assert isinstance(raised, OSError) and "No space left on device" in str(raised)
    assert "3" not in kept


def _within(seconds: float, call):
    """``call()``'s result (or what it raised), failing the test when it has not returned within
    ``seconds`` (generous: these return at once; a run waiting for ever would hang the suite)."""
    import threading

    box = []

    def run():
        try:
            box.append(call())
        except Exception as exc:
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=seconds)
    assert not thread.is_alive(), f"still waiting after {seconds} s: an output its worker could not keep"
    return box[0]
