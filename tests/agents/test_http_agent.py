"""The http agent against a local server: slow replies, error statuses, malformed replies, retries."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ragmem.agents import build_agent
from ragmem.agents.runner import run_live
from ragmem.errors import ConfigError
from ragmem.schema import Example

CALLS: dict[str, int] = {}


class Handler(BaseHTTPRequestHandler):
    """Behaviour is chosen by the query text."""

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _send(self, status, body, content_type="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        query = request["query"]
        CALLS[query] = CALLS.get(query, 0) + 1
        if query == "slow":
            time.sleep(1.5)
        if query == "status500":
            return self._send(500, '{"detail": "boom"}')
        if query == "status404":
            return self._send(404, '{"detail": "no such route"}')
        if query == "flaky" and CALLS[query] == 1:
            return self._send(503, "busy")
        if query == "notjson":
            return self._send(200, "<html>oops</html>", "text/html")
        if query == "badshape":
            return self._send(200, json.dumps({"answer": ["not", "a", "string"]}))
        if query == "auth":
            return self._send(200, json.dumps({"answer": self.headers.get("authorization", "none")}))
        reply = {"answer": f"echo {query}", "contexts": [{"text": "c1", "id": "d1", "source": "rag", "score": 0.9}],
                 "timings": {"retrieve": 0.01, "llm": 0.02}}
        if "history" in request:
            reply["answer"] += f" ({request['session_id']}, {len(request['history'])} turns)"
        return self._send(200, json.dumps(reply))


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        """Quiet: the "slow" case's client times out and leaves, and the late reply's broken pipe would
        print a traceback into whichever test this worker runs next (a bad-input test read it)."""


@pytest.fixture(scope="module")
def url():
    server = _Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/agent"
    server.shutdown()
    server.server_close()


def ex(query, **kw):
    return Example(id=query, query=query, reference_answer="r", **kw)


def agent(url, **kw):
    return build_agent({"agent": {"type": "http", "url": url, "timeout_s": 0.5, **kw}})


def test_good_reply_with_contexts_timings_and_session(url):
    (out,) = run_live(agent(url), [ex("hi", session_id="s1", history=[{"role": "user", "content": "a"}])])
    assert out.error is None and out.answer == "echo hi (s1, 1 turns)"
    assert out.contexts[0].id == "d1" and out.timings_s == {"retrieve": 0.01, "llm": 0.02}


def test_failures_are_recorded_and_the_rest_go_on(url):
    queries = ["ok", "slow", "status500", "status404", "notjson", "badshape", "ok2"]
    outs = run_live(agent(url), [ex(q) for q in queries], concurrency=4, retries=1, backoff_s=0.01)
    errors = {o.example_id: o.error for o in outs}
    assert errors["ok"] is None and errors["ok2"] is None
    assert errors["slow"] == "timed out"                                # the client timeout (0.5 s)
    assert errors["status500"] == "HTTP 500: boom"                      # the failure line of every client
    assert errors["status404"].startswith("HTTP 404")
    assert "is not JSON" in errors["notjson"]
    assert errors["badshape"] == "malformed reply: answer must be a string, got list"
    attempts = {o.example_id: o.attempts for o in outs}
    assert attempts["status500"] == 2 and attempts["slow"] == 2        # transient: retried once
    assert attempts["status404"] == 1 and attempts["notjson"] == 1     # permanent: not retried


def test_retry_recovers_a_passing_503(url):
    (out,) = run_live(agent(url), [ex("flaky")], retries=2, backoff_s=0.01)
    assert out.error is None and out.attempts == 2 and out.answer == "echo flaky"


def test_connection_refused_is_recorded():
    (out,) = run_live(agent("http://127.0.0.1:9/agent"), [ex("x")], retries=0)
    assert out.error == "cannot connect (Connection refused)"


def test_api_key_comes_from_the_named_variable(url, monkeypatch):
    monkeypatch.setenv("RAGMEM_TEST_AGENT_KEY", "s3cret")
    (out,) = run_live(agent(url, api_key_env="RAGMEM_TEST_AGENT_KEY"), [ex("auth")])
    assert out.answer == "Bearer s3cret"
    with pytest.raises(ConfigError, match="RAGMEM_TEST_MISSING is not set"):
        agent(url, api_key_env="RAGMEM_TEST_MISSING")
    with pytest.raises(ConfigError, match="agent.url"):
        agent("ftp://x")
