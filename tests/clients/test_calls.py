"""One call policy for every client that calls an endpoint (ragmem.clients.calls): the LLM judge, the
embeddings client, the HTTP agent, the reference agent's retriever embeddings and its generator.
Against a local server that answers 503 three times and then 200, each makes the same four requests
and succeeds; against one that refuses connections, each stops on the same circuit breaker with the
same failure line. The SDKs' own retries are off everywhere."""

from __future__ import annotations

import re
import socket

import pytest

from ragmem.agents import build_agent
from ragmem.agents.runner import run_live
from ragmem.clients import calls
from ragmem.clients.endpoints import EndpointDown
from ragmem.clients.llm_client import EmbeddingClient, JudgeClient
from ragmem.config.settings import EmbeddingSettings, GeneratorSettings, JudgeSettings
from ragmem.reference.generator import ChatGenerator
from ragmem.reference.retrievers import make_embedder
from ragmem.schema import Example
from tests.openai_stub import Stub

RETRIES = 4        # the default of every client (judge, embeddings, generator: max_retries; agent: retries)
BACKOFF_S = 0.001  # the policy's backoff, made short for the test (no timing is asserted)


def _judge(base_url):
    client = JudgeClient(JudgeSettings(type="llm", model="m", base_url=base_url, max_retries=RETRIES,
                                       retry_backoff_s=BACKOFF_S, cache=False, response_format="text"))
    (result,) = client.run([("answer_correctness", {"question": "q", "reference": "r", "answer": "a"})])
    if result.error:
        raise AssertionError(result.error)
    return result.value["verdict"]


def _embeddings(base_url):
    client = EmbeddingClient(EmbeddingSettings(model="m", base_url=base_url, max_retries=RETRIES,
                                               retry_backoff_s=BACKOFF_S, cache=False))
    (result,) = client.embed(["a text"])
    if result.error:
        raise AssertionError(result.error)
    return result.value


def _http_agent(base_url):
    agent = build_agent({"agent": {"type": "http", "url": f"{base_url}/agent", "timeout_s": 10}})
    (output,) = run_live(agent, [Example(id="x", query="q", reference_answer="r")], retries=RETRIES, backoff_s=BACKOFF_S)
    if output.error:
        raise AssertionError(output.error)
    return output.answer


def _retriever_embeddings(base_url):
    embed = make_embedder(EmbeddingSettings(model="m", base_url=base_url, max_retries=RETRIES,
                                            retry_backoff_s=BACKOFF_S))
    return embed(["a text"])


def _generator(base_url):
    generate = ChatGenerator(GeneratorSettings(type="openai", model="m", base_url=base_url, max_retries=RETRIES,
                                               retry_backoff_s=BACKOFF_S))
    return generate("q", ["a passage"])


CLIENTS = {"judge": (_judge, "judge.base_url"), "embeddings": (_embeddings, "embeddings.base_url"),
           "http agent": (_http_agent, "agent.url"), "retriever embeddings": (_retriever_embeddings, "embeddings.base_url"),
           "generator": (_generator, "generator.base_url")}


def _stub(fail):
    return Stub(chat=lambda request: {"verdict": "yes", "reason": "fine"}, embed=lambda text: [0.6, 0.8],
                agent=lambda request: {"answer": "an answer", "contexts": ["c"]}, fail=fail)


@pytest.mark.parametrize("name", CLIENTS)
def test_503_three_times_then_200_is_four_requests_and_a_success(name):
    drive, _ = CLIENTS[name]
    with _stub(lambda n: "503" if n <= 3 else None) as stub:
        value = drive(stub.base_url)
    assert value is not None
    assert len(stub.requests) == 4, name  # the same retry count for every client


def _refused_url() -> str:
    with socket.socket() as s:  # a port bound and closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_a_refused_endpoint_trips_the_same_breaker_with_the_same_line_for_every_client():
    url = _refused_url()
    lines = {}
    for name, (drive, setting) in CLIENTS.items():
        with pytest.raises(EndpointDown) as caught:
            drive(url)
        called = f"{url}/agent" if name == "http agent" else url
        lines[name] = str(caught.value).replace(setting, "SETTING").replace(called, "URL")
        assert caught.value.exit_code == 3, name  # during a run: the run stops, resumable
    expected = "SETTING URL: 5 consecutive failures (last: cannot connect (Connection refused)); the run stopped"
    assert lines == {name: expected for name in CLIENTS}


def test_the_policy_waits_retry_after_else_a_jittered_doubling_backoff():
    class Busy(Exception):
        status_code = 429
        retry_after = "2.5"

    policy = calls.Policy(retries=3, backoff_s=1.0)
    assert policy.wait(1, Busy()) == 2.5
    waits = [policy.wait(attempt, TimeoutError()) for attempt in (1, 2, 3)]
    assert 0.5 <= waits[0] <= 1.5 and 1.0 <= waits[1] <= 3.0 and 2.0 <= waits[2] <= 6.0
    assert calls.Policy(backoff_s=100.0).wait(5, TimeoutError()) == calls.MAX_WAIT_S


@pytest.mark.parametrize("status, retried, endpoint", [(429, True, False), (500, True, False), (503, True, False),
                                                       (501, False, False), (400, False, None), (422, False, None),
                                                       (401, False, True), (403, False, True), (404, False, True)])
def test_which_statuses_are_retried_and_which_count_against_the_endpoint(status, retried, endpoint):
    class Status(Exception):
        status_code = status

    assert calls.transient(Status()) is retried
    assert calls.endpoint_failure(Status()) is endpoint
    assert calls.describe(Status()) == f"HTTP {status}"


def test_no_client_keeps_the_sdks_own_retries():
    """The SDK's retries would bypass the breaker: every OpenAI client ragmem makes has max_retries=0."""
    from tests.conftest import ROOT

    sources = [p.read_text(encoding="utf-8") for p in (ROOT / "ragmem").rglob("*.py")]
    made = sum(len(re.findall(r"\b(?:Async)?OpenAI\(", s)) for s in sources)  # (not NotOpenAI, an error)
    assert made >= 3 and sum(s.count("max_retries=0") for s in sources) >= made


def test_a_dollar_allowance_reserves_the_most_and_keeps_the_cost():
    from ragmem.clients.calls import Allowance, Spent
    from ragmem.config.settings import Price

    price = Price(input=10.0, output=30.0)  # USD per million tokens
    messages = [{"role": "system", "content": "judge"}, {"role": "user", "content": "答案是什么？ the answer"}]
    most = calls.most_usd(messages, 256, price)
    tokens_in = len("judge".encode()) + len("答案是什么？ the answer".encode()) + 2 * calls.TOKENS_PER_MESSAGE
    assert most == pytest.approx((tokens_in * 10 + 256 * 30) / 1e6)  # bytes, not characters: 3 a Chinese one
    assert calls.most_usd(messages, 256, None) == 0.0
    allowance = Allowance("judge", None, usd=0.02, usd_setting="sweep.budget.usd")
    with allowance.installed():
        Allowance.spend("judge", 0.009)
        Allowance.settle("judge", 0.009, 0.001)  # its reply cost less than its most
        Allowance.spend("judge", 0.009)  # no reply (failed): stays at its most
        assert allowance.spent_usd == pytest.approx(0.010)
        Allowance.spend("judge", 0.009)
        with pytest.raises(Spent, match=r"not sent: sweep.budget.usd 0.02 spent \(\$0.0190 so far; this request "
                                        r"could cost up to \$0.0090\)"):
            Allowance.spend("judge", 0.009)
    assert allowance.sent == 3 and allowance.refused == 1 and allowance.spent_usd <= 0.02
