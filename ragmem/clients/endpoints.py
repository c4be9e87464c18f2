"""The endpoints a run calls, checked before the first example and watched while it runs.

**Preflight** (:func:`preflight`): before the first agent or LLM call, every configured endpoint
is asked once, all at once, with a short timeout: the LLM judge (``judge.base_url``), the
embeddings endpoint, the reference agent's generator, an HTTP agent (``agent.url``), HTTP memory
layers (``bench.methods[].url``) and an MLflow tracking server. An endpoint is *dead* when no HTTP
answer comes (refused, reset, DNS, TLS, timeout) or it refuses the credentials (401/403) or, for an
MLflow server, its ``/health`` does not answer 200. A dead one stops the command before any work
with :class:`EndpointDown` naming the setting, the URL and the error (the CLI exits 2). An
OpenAI-compatible endpoint is asked as the run will call it: its model list (``GET /models``), else
the path the run calls (``POST /chat/completions`` or ``/embeddings``) with an empty request, which
such a server refuses with a JSON error and bills nothing; a 404 there is a wrong path, a reply
that is not JSON a server of another kind, each said so.

**Circuit breaker** (:class:`Breaker`): one per endpoint, fed by every attempt. It opens after
``consecutive`` endpoint failures in a row (connection-level, or 401/403/404: statuses no retry
fixes), or when ``ratio`` of the last ``window`` attempts were refused or failed (5xx, 429), or
when none of the last ``window`` attempts got a reply. A timeout is a slow reply, not a refusal: a
slow server that still answers some requests is alive, and its timed-out requests are retried and
then recorded per item, never a stopped run. Once open, every call on that endpoint raises :class:`EndpointDown` at once, the run
stops, keeps its journal (resumable) and is marked FAILED (the CLI exits 3). When the failures
were statuses no wait fixes (404, 401, 403), the resume hint says to correct the setting first: a
resume may change an endpoint's URL (:data:`ragmem.run.resume.RESUME_FREE`).

Written by hand: the breaker must see the SDK's and httpx's own exception types and count
per endpoint across threads and event loops; the libraries we use (tenacity, the openai SDK)
retry single calls but share no state between calls.
"""

from __future__ import annotations

import base64
import collections
import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ragmem.config.secrets import mask_url, scrub
from ragmem.errors import RagmemError
from ragmem.metrics import relevancy

OPENAI_URL = "https://api.openai.com/v1"
PROBE_TIMEOUT_S = 5.0


class EndpointDown(RagmemError):
    """An endpoint cannot be reached (preflight) or stopped answering during a run (breaker).
    ``fix``: the setting to correct before a resume can succeed (the endpoint answered with a status
    no retry changes: a wrong path, refused credentials), else ``None`` (it may come back)."""

    def __init__(self, message: str, during_run: bool = False, fix: str | None = None):
        super().__init__(message)
        self.exit_code = 3 if during_run else 2
        self.fix = fix


@dataclass(frozen=True)
class Endpoint:
    setting: str    # the setting that names it, e.g. judge.base_url
    url: str
    kind: str       # "openai" (GET {url}/models, else POST {url}/{path}), "http" (any answer),
                    # "mlflow" (GET {url}/health), "dask" (a TCP connection to a scheduler's tcp://HOST:PORT)
    key_env: str | None = None
    path: str = "chat/completions"  # "openai": the path the run calls, appended to the URL as the SDK does
    model: str | None = None        # "openai": the model the run asks for, and the setting that names it
    model_setting: str | None = None


class _Named(str):
    """A probe's problem that names its own setting (a model the server does not serve), not the URL's."""


def configured(cfg: Any) -> list[Endpoint]:
    """The endpoints ``cfg`` (a :class:`ragmem.config.loading.RunConfig`) makes the run call (the same
    conditions under which :mod:`ragmem.run.pipeline` and :mod:`ragmem.memory.benchmark` build clients)."""
    found: list[Endpoint] = []
    embedder = relevancy.embeds(cfg)
    if cfg.judge.asks_llm:
        found.append(Endpoint("judge.base_url", cfg.judge.base_url or OPENAI_URL, "openai", cfg.judge.api_key_env,
                              model=cfg.judge.model, model_setting="judge.model"))
    reference = cfg.agent.type == "reference"
    bench = bool(getattr(cfg, "bench", None) and cfg.bench.methods)
    if embedder or (reference and cfg.retriever.type in ("dense", "hybrid") and cfg.embeddings.model):
        found.append(Endpoint("embeddings.base_url", cfg.embeddings.base_url or OPENAI_URL, "openai",
                              cfg.embeddings.api_key_env, "embeddings", cfg.embeddings.model, "embeddings.model"))
    if (reference or bench) and cfg.generator.type == "openai":
        found.append(Endpoint("generator.base_url", cfg.generator.base_url or OPENAI_URL, "openai",
                              cfg.generator.api_key_env, model=cfg.generator.model, model_setting="generator.model"))
    if cfg.agent.type == "http":
        found.append(Endpoint("agent.url", cfg.agent.url, "http"))
    for i, method in enumerate(cfg.bench.methods if bench else ()):
        if getattr(method, "type", None) in ("http", "mcp") and method.url:
            found.append(Endpoint(f"bench.methods[{i}].url", method.url, "http"))
    if cfg.tracking.enabled and cfg.tracking_uri.startswith(("http://", "https://")):
        found.append(Endpoint("tracking.uri", cfg.tracking_uri, "mlflow"))
    orchestration = getattr(cfg, "orchestration", None)
    if orchestration is not None and orchestration.task_runner == "dask" and orchestration.dask_address:
        found.append(Endpoint("orchestration.dask_address", orchestration.dask_address, "dask"))
    return list(dict.fromkeys(found))


def _probe_tcp(address: str, timeout: float) -> str | None:
    """A Dask scheduler (``tcp://HOST:PORT``) accepts a connection, else why not."""
    import socket
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(address if "://" in address else f"tcp://{address}")
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        return f"not a usable address ({exc})"
    if not host or not port:
        return "not a usable address (expected tcp://HOST:PORT)"
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as exc:
        return f"cannot connect ({exc.strerror or exc})"


def sdk_target(base_url: str | None) -> tuple[str | None, dict[str, str] | None]:
    """A ``base_url`` as the OpenAI SDK takes it: without its query string, which becomes the
    ``default_query`` of every request (the SDK appends a request's path to the URL's text, so
    ``.../v1?api_key=k`` would ask for ``/v1/?api_key=kchat/completions``).

    >>> sdk_target("http://127.0.0.1:8080/v1?api_key=k&x=1")
    ('http://127.0.0.1:8080/v1', {'api_key': 'k', 'x': '1'})
    >>> sdk_target("http://127.0.0.1:8080/v1")
    ('http://127.0.0.1:8080/v1', None)
    """
    if not base_url or "?" not in base_url:
        return base_url, None
    parts = urllib.parse.urlsplit(base_url)
    query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", parts.fragment)), query or None


def without_userinfo(url: str) -> tuple[str, str | None]:
    """``url`` without its ``user:password@`` part, and that part as an HTTP Basic Authorization
    header (urllib would take it for a host name); ``None`` without one.

    >>> without_userinfo("http://bob:pw@127.0.0.1:8000/agent?x=1")
    ('http://127.0.0.1:8000/agent?x=1', 'Basic Ym9iOnB3')
    """
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()).decode()
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)), f"Basic {token}"


def _ask(url: str, headers: dict[str, str], timeout: float, body: bytes | None = None) -> tuple[int, str, bytes] | str:
    """``(status, content type, the first 4 KB of the body)`` of a GET (a POST of ``body``), or why no
    HTTP answer came (one line)."""
    try:
        request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET",
                                         headers={**headers, **({"Content-Type": "application/json"} if body else {})})
    except ValueError as exc:
        return f"not a usable URL ({scrub(str(exc))})"
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, reply.headers.get("Content-Type", ""), reply.read(4096)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", "") if exc.headers else "", exc.read(4096) if exc.fp else b""
    except urllib.error.URLError as exc:
        return f"cannot connect ({getattr(exc.reason, 'strerror', None) or exc.reason})"
    except (TimeoutError, OSError) as exc:
        return f"no answer within {timeout:g} s" if isinstance(exc, TimeoutError) else f"cannot connect ({exc})"
    except ValueError as exc:  # a malformed URL
        return f"not a usable URL ({exc})"


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _openai(endpoint: Endpoint, url: str, query: str, headers: dict[str, str], timeout: float) -> str | None:
    """An OpenAI-compatible API at ``url``: its model list answers (``GET /models``: JSON with
    ``data``), else the path the run calls answers an empty request as such an API does (a JSON
    error, 400 or 422: nothing is generated, nothing billed). A 404 there is a wrong path; a reply
    that is not JSON is a server of another kind."""
    listed = _ask(f"{url}/models{query}", headers, timeout)
    if isinstance(listed, str):
        return listed
    if listed[0] in (401, 403):
        return f"HTTP {listed[0]}: the credentials were refused (check {endpoint.key_env or 'the key'})"
    models = _json(listed[2])
    if listed[0] == 200 and isinstance(models, dict) and "data" in models:
        return _served(endpoint, url, query, headers, timeout, models["data"])
    called = _ask(f"{url}/{endpoint.path}{query}", headers, timeout, body=b"{}")
    if isinstance(called, str):
        return called
    status, content_type, body = called
    if status in (401, 403):
        return f"HTTP {status}: the credentials were refused (check {endpoint.key_env or 'the key'})"
    if status == 404:
        return (f"wrong path: POST {mask_url(url)}/{endpoint.path} answered HTTP 404 (and GET /models HTTP "
                f"{listed[0]}); {endpoint.setting} is the API's root, to which /{endpoint.path} is appended "
                f"(for most servers it ends in /v1)")
    if _json(body) is None:
        shown = " ".join(body.decode("utf-8", "replace").split())[:60]
        return (f"not an OpenAI-compatible server: POST /{endpoint.path} answered HTTP {status} "
                f"with {content_type.split(';')[0] or 'no content type'}" + (f" ({shown!r})" if shown else ""))
    if status in (405, 501):
        return f"not an OpenAI-compatible server: POST /{endpoint.path} answered HTTP {status} (not allowed)"
    return None


def _served(endpoint: Endpoint, url: str, query: str, headers: dict[str, str], timeout: float,
            listed: Any) -> str | None:
    """The model the run asks for, against the server's list: listed (``NAME`` or Ollama's
    ``NAME:latest``), or the list is empty, or one minimal request with it is answered (a server that
    takes any name, as llama.cpp's); else :class:`_Named`, the setting named."""
    ids = [str(m.get("id")) for m in listed if isinstance(m, dict) and m.get("id")] if isinstance(listed, list) else []
    model = endpoint.model
    if not model or not ids or model in ids or f"{model}:latest" in ids:
        return None
    body = {"model": model, "input": "ok"} if endpoint.path == "embeddings" else \
        {"model": model, "messages": [{"role": "user", "content": "ok"}], "max_tokens": 1}
    asked = _ask(f"{url}/{endpoint.path}{query}", headers, timeout, body=json.dumps(body).encode())
    if not isinstance(asked, str) and asked[0] == 200:
        return None
    shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    return _Named(f"{endpoint.model_setting} {model!r}: the server at {mask_url(url)} does not serve it (it serves: "
                  f"{shown})")


def probe(endpoint: Endpoint, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """``None`` when the endpoint answers as the run will call it, else why not (one line)."""
    import os

    if endpoint.kind == "dask":
        return _probe_tcp(endpoint.url, timeout)
    url, basic = without_userinfo(endpoint.url.rstrip("/"))
    key = os.environ.get(endpoint.key_env) if endpoint.key_env else None
    headers = {"Authorization": f"Bearer {key}"} if key else {"Authorization": basic} if basic else {}
    if endpoint.kind == "openai":
        target, query = sdk_target(url)  # (the SDK sends the URL's query with every request)
        return _openai(endpoint, target or url, f"?{urllib.parse.urlencode(query)}" if query else "", headers, timeout)
    answered = _ask({"mlflow": f"{url}/health"}.get(endpoint.kind, url), headers, timeout)
    if isinstance(answered, str):
        return answered
    status = answered[0]
    if status in (401, 403):
        return f"HTTP {status}: the credentials were refused (check {endpoint.key_env or 'the key'})"
    if endpoint.kind == "mlflow" and status != 200:
        return f"HTTP {status} from /health: not an MLflow tracking server that is up"
    return None


def preflight(endpoints: list[Endpoint], log=None, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Probe every endpoint at once; raise :class:`EndpointDown` for the first dead one (in order)."""
    if not endpoints:
        return
    with ThreadPoolExecutor(max_workers=len(endpoints), thread_name_prefix="ragmem-preflight") as pool:
        problems = list(pool.map(lambda e: probe(e, timeout), endpoints))
    dead = [(e, p) for e, p in zip(endpoints, problems) if p]
    if dead:
        endpoint, problem = dead[0]
        more = f" (and {len(dead) - 1} more: {', '.join(e.setting for e, _ in dead[1:])})" if len(dead) > 1 else ""
        where = "" if isinstance(problem, _Named) else f"{endpoint.setting} {mask_url(endpoint.url)}: "
        raise EndpointDown(f"{where}{problem}{more}; nothing was run (--no-preflight skips this check)")
    if log:
        log("preflight: %d endpoint(s) answer: %s", len(endpoints), ", ".join(e.setting for e in endpoints))


def check_store(uri: str, setting: str = "tracking.uri") -> None:
    """A tracking server that a command only reads from (``compare``, ``report``, a gate's baseline)
    answers, or :class:`EndpointDown` in one line (exit 2); a database URI is not probed."""
    if uri.startswith(("http://", "https://")):
        problem = probe(Endpoint(setting, uri, "mlflow"))
        if problem:
            raise EndpointDown(f"{setting} {mask_url(uri)}: {problem}; nothing was read")


#: how often failures of an endpoint that is retried are said (the first at once)
SAY_EVERY_S = 10.0
log = logging.getLogger("ragmem")


class Breaker:
    """Counts the outcomes of the attempts on one endpoint (thread-safe) and opens when it is down."""

    def __init__(self, setting: str, url: str, consecutive: int = 5, window: int = 20, ratio: float = 0.8):
        self.setting, self.url = setting, mask_url(url)  # the URL is for messages: its secrets masked
        self.consecutive, self.window, self.ratio = consecutive, window, ratio
        self._lock = threading.Lock()
        self._run = 0
        self._recent: collections.deque[str] = collections.deque(maxlen=window)  # "ok", "slow" or "failed"
        self.reason: str | None = None
        self.fix: str | None = None  # the setting to correct first, when the last failure was one no wait fixes
        self._failed, self._said_failed = 0, 0  # (failures said while retrying: SAY_EVERY_S)
        self._said_at: float | None = None

    @property
    def open(self) -> bool:
        return self.reason is not None

    def check(self) -> None:
        """Raise :class:`EndpointDown` when the breaker is open (before an attempt)."""
        if self.reason is not None:
            raise EndpointDown(self.reason, during_run=True, fix=self.fix)

    def success(self) -> None:
        with self._lock:
            self._run = 0
            self._recent.append("ok")

    def _say(self, description: str) -> None:
        """While the endpoint fails and is retried, say so at once and then every :data:`SAY_EVERY_S`
        (``judge.base_url http://127.0.0.1:8080/v1: 3 requests failed (last: cannot connect); retrying``),
        never a minute of a bar that does not move. (Under the lock.)"""
        now = time.monotonic()
        if self.reason is None and (self._said_at is None or now - self._said_at >= SAY_EVERY_S):
            failed = self._failed - self._said_failed if self._said_at is not None else self._failed
            log.warning("%s %s: %d %s failed (last: %s); retrying", self.setting, self.url, failed,
                        "request" if failed == 1 else "requests", description)
            self._said_at, self._said_failed = now, self._failed

    def failure(self, description: str, endpoint_failure: bool, slow: bool = False, wrong_setting: bool = False) -> None:
        """One failed attempt; ``endpoint_failure``: connection-level or a status no retry fixes;
        ``slow``: a timeout, which says the endpoint is slow rather than down, and counts only while
        no attempt of the window got a reply (a slow server that answers some requests is alive);
        ``wrong_setting``: the answer says the setting itself is wrong (a path or key refused, a server
        of another kind: :func:`ragmem.clients.calls.wrong_setting`), to be corrected before a resume."""
        with self._lock:
            self._recent.append("slow" if slow else "failed")
            self._run = self._run + 1 if endpoint_failure else 0
            self._failed += 1
            self._say(description)
            failed = self._recent.count("failed")
            if self.reason is None and self._run >= self.consecutive:
                self.reason = (f"{self.setting} {self.url}: {self._run} consecutive failures "
                               f"(last: {description}); the run stopped")
                if wrong_setting:  # the last of them: the same setting would fail the same way
                    self.fix = self.setting
            elif self.reason is None and len(self._recent) == self.window and failed >= self.ratio * self.window:
                self.reason = (f"{self.setting} {self.url}: {failed} of the last {self.window} calls failed "
                               f"(last: {description}); the run stopped")
            elif self.reason is None and len(self._recent) == self.window and "ok" not in self._recent:
                timeouts = self._recent.count("slow")
                self.reason = (f"{self.setting} {self.url}: none of the last {self.window} calls got a reply "
                               f"({timeouts} timed out; last: {description}); the run stopped"
                               + ("; a slow server: raise the timeout (timeout_s) or lower the concurrency"
                                  if timeouts else ""))
