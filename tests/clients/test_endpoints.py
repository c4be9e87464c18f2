"""The preflight asks an OpenAI-compatible endpoint as the run will call it (a local HTTP server on
127.0.0.1 that answers as different servers do): a wrong path and a server of another kind are said
so before any work; a server without a model list still passes when the path the run calls answers
as an OpenAI-compatible API; a breaker opened by a wrong path asks for the setting to be corrected,
and a resume may change it."""

from __future__ import annotations

import dataclasses

import pytest

from ragmem.clients import endpoints
from ragmem.clients.endpoints import Breaker, Endpoint, EndpointDown, probe
from ragmem.config.loading import RunConfig
from ragmem.exits import _resume_hint
from ragmem.run.resume import settings_that_differ
from tests.openai_stub import OtherServers, serving

@pytest.fixture(scope="module")
def base():
    server, url = serving(OtherServers)
    yield url
    server.shutdown()


def _judge(url, path="chat/completions"):
    return Endpoint("judge.base_url", url, "openai", None, path)


def test_an_endpoint_is_asked_as_the_run_will_call_it(base):
    assert probe(_judge(f"{base}/v1")) is None                     # the model list answers
    assert probe(_judge(f"{base}/bare")) is None                   # no model list; the chat path answers 422 JSON
    assert probe(_judge(f"{base}/bare", "embeddings")) is None
    assert probe(_judge(f"{base}/v1?api-version=1")) is None       # the URL's query goes with every request
    assert probe(_judge(f"{base}/v2")) == (
        f"wrong path: POST {base}/v2/chat/completions answered HTTP 404 (and GET /models HTTP 404); judge.base_url "
        f"is the API's root, to which /chat/completions is appended (for most servers it ends in /v1)")
    assert probe(_judge(f"{base}/html")) == (
        "not an OpenAI-compatible server: POST /chat/completions answered HTTP 501 with text/html "
        "('<!DOCTYPE html><html><body>Unsupported method</body></html>')")
    assert probe(_judge(f"{base}/locked")).startswith("HTTP 401: the credentials were refused")
    assert probe(_judge("http://127.0.0.1:9/v1")) == "cannot connect (Connection refused)"


def test_a_breaker_opened_by_a_wrong_path_asks_for_the_setting_and_a_resume_may_change_it():
    breaker = Breaker("judge.base_url", "http://127.0.0.1:1/v2")
    for _ in range(5):
        breaker.failure("HTTP 404: Not Found", endpoint_failure=True, wrong_setting=True)
    with pytest.raises(EndpointDown) as raised:
        breaker.check()
    raised.value.ragmem_progress = ("abc123", 3, 8)
    argv = ["run", "c.yaml", "--set", "judge.base_url=http://127.0.0.1:1/v2"]
    assert _resume_hint(raised.value, argv) == (
        "; correct judge.base_url (a resume may change it), then resume with: ragmem run c.yaml --set "
        "judge.base_url=http://127.0.0.1:1/v2 --resume abc123")
    refused = Breaker("judge.base_url", "http://127.0.0.1:9/v1")  # a server that may come back: resume as it is
    for _ in range(5):
        refused.failure("cannot connect (Connection refused)", endpoint_failure=True)
    with pytest.raises(EndpointDown) as down:
        refused.check()
    down.value.ragmem_progress = ("abc123", 3, 8)
    assert _resume_hint(down.value, argv).startswith("; resume with: ragmem run c.yaml")
    # the corrected URL is not a change of settings; the model is
    started = {"judge.base_url": "http://h/v2", "judge.model": "m"}
    assert settings_that_differ(started, {"judge.base_url": "http://h/v1", "judge.model": "m"}) == []
    assert settings_that_differ(started, {"judge.base_url": "http://h/v1", "judge.model": "other"}) == ["judge.model"]


def test_a_run_past_the_preflight_names_a_server_of_another_kind_and_no_library_internals(base):
    """With --no-preflight, a judge aimed at a web server (200 with a page to every POST): each
    request fails as "not an OpenAI-compatible server", the breaker opens after five and asks for the
    setting; a connection that failed inside the client library is said without its internals."""
    import httpx
    import openai

    from ragmem.clients.calls import describe
    from ragmem.clients.llm_client import JudgeClient
    from ragmem.config.settings import JudgeSettings

    client = JudgeClient(JudgeSettings(type="llm", model="m", base_url=f"{base}/nginx", retry_backoff_s=0.001,
                                       cache=False, response_format="text", max_concurrency=1))
    with pytest.raises(EndpointDown) as raised:
        client.run([("answer_correctness", {"question": f"q{i}", "reference": "r", "answer": "a"}) for i in range(8)])
    assert str(raised.value) == (
        f"judge.base_url {base}/nginx: 5 consecutive failures (last: not an OpenAI-compatible server: the reply "
        f"is not JSON ('<html><body>Welcome to nginx!</body></html>')); the run stopped")
    assert raised.value.fix == "judge.base_url"
    request = httpx.Request("POST", "http://h/v1/chat/completions")
    inner = openai.APIConnectionError(request=request)
    inner.__cause__ = RuntimeError("no running event loop")
    assert describe(inner) == "cannot connect (the connection ended before a reply)"


def test_a_model_the_server_does_not_serve_is_refused_before_any_work():
    """A server that lists its models (and refuses others, as vLLM and Ollama do): a wrong judge.model
    is one line naming the setting, exit 2, before any run; a listed one, Ollama's ``NAME:latest`` and a
    server that takes any name (llama.cpp: the minimal request answered) pass."""
    from tests.openai_stub import Stub

    with Stub(chat=lambda r: {"verdict": "yes", "reason": "ok"}, models=["qwen2.5:latest", "judge-a"]) as stub:
        wrong = endpoints.Endpoint("judge.base_url", stub.base_url, "openai", model="tiny-judge-7b",
                                   model_setting="judge.model")
        with pytest.raises(endpoints.EndpointDown) as caught:
            endpoints.preflight([wrong])
        assert caught.value.exit_code == 2
        assert str(caught.value) == (f"judge.model 'tiny-judge-7b': the server at {stub.base_url} does not serve it (it "
                                     "serves: qwen2.5:latest, judge-a); nothing was run (--no-preflight skips this check)")
        for model in ("judge-a", "qwen2.5"):
            endpoints.preflight([dataclasses.replace(wrong, model=model)])
    with Stub(chat=lambda r: {"verdict": "yes", "reason": "ok"}) as anything:  # lists none, takes any name
        anything.models = None
        endpoints.preflight([endpoints.Endpoint("judge.base_url", anything.base_url, "openai", model="whatever",
                                                model_setting="judge.model")])


def test_the_configured_endpoints_carry_their_models():
    cfg = RunConfig.from_dict({"judge": {"type": "llm", "model": "j", "base_url": "http://127.0.0.1:1/v1"},
                               "metrics": ["pass_rate"]})
    (judge,) = endpoints.configured(cfg)
    assert (judge.model, judge.model_setting) == ("j", "judge.model")
