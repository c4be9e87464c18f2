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
