"""A local OpenAI-compatible HTTP server for the tests (127.0.0.1 only, no network).

``Stub(chat=fn, embed=fn)``: ``chat(request_json) -> dict`` returns the reply object for a chat
completion (it is serialised as the message content), ``embed(text) -> list[float]``. Failures are
injected with ``fail(request_number) -> None | "429" | "500" | "503" | "timeout" | "truncated" | "reset"`` (the
connection closed without a reply, as a server that died mid-run looks to a client).
``reject_json_schema`` / ``reject_json_object`` answer HTTP 400 to those response formats;
``agent(request_json) -> dict`` answers ``POST .../agent`` as an HTTP agent; ``runaway`` never answers a request without ``max_tokens`` and cuts a longer reply at it
(``finish_reason: length``), as a small local model does. Every request
is recorded in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import urlsplit


class Stub:
    def __init__(self, chat: Callable[[dict], Any] | None = None, embed: Callable[[str], list[float]] | None = None,
                 fail: Callable[[int], str | None] | None = None, latency_s: float = 0.0,
                 reject_json_schema: bool = False, retry_after: str = "0", reject_json_object: bool = False,
                 runaway: bool = False, agent: Callable[[dict], dict] | None = None, serves: str | None = None,
                 models: list[str] | None = None):
        self.chat, self.embed, self.fail, self.agent = chat, embed, fail, agent
        self.serves = serves  # the model every reply names (as a server with one model loaded), else the one asked
        self.models = models  # the models GET /models lists, and the only ones a request may ask (None: any)
        self.latency_s, self.reject_json_schema, self.retry_after = latency_s, reject_json_schema, retry_after
        self.reject_json_object, self.runaway = reject_json_object, runaway
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.paths: list[str] = []  # each request's path, its query string included
        self.gets: list[tuple[str, dict]] = []  # (path, headers) of each GET (preflight probes)
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers: a connection per request costs the client
            disable_nagle_algorithm = True  # headers and body are two writes: Nagle + delayed ACK add ~40 ms

            def log_message(self, *args):
                pass

            def handle(self):  # a client that timed out closed its socket: not an error here
                try:
                    super().handle()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _send(self, status, payload, headers=None):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # a preflight probe (GET /models, or the agent's URL): recorded, answered
                with stub._lock:
                    stub.gets.append((self.path, dict(self.headers)))
                return self._send(200, {"object": "list", "data": [{"id": m, "object": "model"}
                                                                   for m in stub.models or []]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                with stub._lock:
                    stub.requests.append(body)
                    stub.headers.append(dict(self.headers))
                    stub.paths.append(self.path)
                    number = len(stub.requests)
                if stub.latency_s:
                    time.sleep(stub.latency_s)
                if stub.models is not None and "model" in body and body["model"] not in stub.models:  # (as vLLM, Ollama)
                    return self._send(404, {"error": {"message": f"model '{body['model']}' not found"}})
                failure = stub.fail(number) if stub.fail else None
                if failure == "reset":
                    self.close_connection = True
                    return
                if failure == "429":
                    return self._send(429, {"error": {"message": "rate limited", "type": "rate_limit"}},
                                      {"retry-after": stub.retry_after})
                if failure == "500":
                    return self._send(500, {"error": {"message": "internal error"}})
                if failure == "503":
                    return self._send(503, {"error": {"message": "service unavailable"}})
                if failure in ("400", "401", "403", "404", "422", "501"):
                    return self._send(int(failure), {"error": {"message": f"scripted HTTP {failure}"}})
                if failure == "timeout":
                    time.sleep(3.0)
                    return self._send(500, {"error": {"message": "too late"}})
                if stub.agent is not None and urlsplit(self.path).path.endswith("/agent"):  # an HTTP agent (ragmem.agents.http)
                    return self._send(200, stub.agent(body))
                if self.path.endswith("/embeddings"):
                    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    data = [{"object": "embedding", "index": i, "embedding": stub.embed(t)} for i, t in enumerate(texts)]
                    return self._send(200, {"object": "list", "data": data, "model": body["model"],
                                            "usage": {"prompt_tokens": 3 * len(texts), "total_tokens": 3 * len(texts)}})
                fmt = (body.get("response_format") or {}).get("type")
                if (stub.reject_json_schema and fmt == "json_schema") or (stub.reject_json_object and fmt == "json_object"):
                    return self._send(400, {"error": {"message": f"response_format {fmt} is not supported",
                                                      "param": "response_format"}})
                reply = stub.chat(body)
                content = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
                if failure == "truncated":
                    content = content[: len(content) // 2]
                finish = "stop"
                if stub.runaway:  # a model that rambles: without max_tokens it never stops
                    if "max_tokens" not in body:
                        time.sleep(3600)
                    if len(content.split()) > body["max_tokens"]:  # (a word stands for a token)
                        content, finish = " ".join(content.split()[: body["max_tokens"]]), "length"
                return self._send(200, {
                    "id": f"chatcmpl-{number}", "object": "chat.completion", "created": 0,
                    "model": stub.serves or body.get("model", "stub"),
                    "choices": [{"index": 0, "finish_reason": finish,
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # socketserver's default backlog of 5 drops connections at concurrency 32
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "Stub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        # (serve_forever polls for shutdown every 0.02 s: at its default 0.5 s, the suite's 65 stubs
        # waited 26 s in all for their servers to notice)
        self.server.shutdown()
        self.server.server_close()


def user_text(request: dict) -> str:
    """The last user message of a chat request."""
    return [m["content"] for m in request["messages"] if m["role"] == "user"][-1]


def data_block(request: dict, name: str) -> str:
    text = [m["content"] for m in request["messages"] if m["role"] == "user"][0]
    start = text.index(f'<data name="{name}">\n') + len(f'<data name="{name}">\n')
    from ragmem.prompts.templates import unescape

    return unescape(text[start:text.index("\n</data>", start)])


def verdict_by_answer(request: dict) -> dict:
    """A judge that says yes exactly when the answer block contains "good"."""
    return {"verdict": "yes" if "good" in data_block(request, "answer") else "no", "reason": "scripted"}


class OtherServers(BaseHTTPRequestHandler):
    """Servers an endpoint setting may name, as they answer: /v1 an OpenAI-compatible API; /bare one
    without GET /models (as some proxies); /html a web site (404 and 501 pages); /nginx a web server
    that answers any POST with its page; /locked one that refuses the key; anything else 404 in JSON
    (an API's path given wrong: ``.../v2``). Run it with :func:`serving`."""

    def log_message(self, *args):
        pass

    def _send(self, status, body, content_type="application/json"):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.startswith("/v1/models"):
            return self._send(200, {"object": "list", "data": [{"id": "m"}]})
        if self.path.startswith("/locked"):
            return self._send(401, {"error": {"message": "bad key"}})
        if self.path.startswith("/html"):
            return self._send(404, "<!DOCTYPE html><html><body>Not Found</body></html>", "text/html")
        return self._send(404, {"detail": "Not Found"})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.startswith(("/bare/chat/completions", "/bare/embeddings")):
            return self._send(422, {"detail": [{"msg": "field required", "loc": ["body", "model"]}]})
        if self.path.startswith("/locked"):
            return self._send(401, {"error": {"message": "bad key"}})
        if self.path.startswith("/html"):
            return self._send(501, "<!DOCTYPE html><html><body>Unsupported method</body></html>", "text/html")
        if self.path.startswith("/nginx"):  # a web server that answers any POST with its page
            return self._send(200, "<html><body>Welcome to nginx!</body></html>", "text/html")
        return self._send(404, {"detail": "Not Found"})


def serving(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    """``handler`` served on a free 127.0.0.1 port, on a daemon thread: the server and its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
