"""An agent behind an HTTP endpoint.

Request: ``POST agent.url`` with JSON ``{"query", "session_id"?, "history"?}`` (and the header
``Authorization: Bearer $<agent.api_key_env>`` when that variable is named). Reply: JSON
``{"answer", "contexts": [...], "timings"?: {stage: seconds}}``. Connection errors, timeouts and
5xx/429 replies are retried (``agent.retries``); what still fails, and any other non-2xx or
malformed reply, is recorded for that example.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from ragmem.endpoints import Breaker
from ragmem.errors import ConfigError
from ragmem.schema import Example


class AgentCallError(Exception):
    """The endpoint answered, but not with a usable reply."""

    def __init__(self, message: str, retryable: bool = False, status: int | None = None):
        super().__init__(message)
        self.retryable, self.status = retryable, status


class HttpAgent:
    name = "http"
    live = True

    def __init__(self, url: str, timeout_s: float | None = 60.0, api_key_env: str | None = None,
                 max_connections: int = 16):
        if not url or not str(url).startswith(("http://", "https://")):
            raise ConfigError(f"agent.url: expected an http(s) URL, got {url!r}")
        headers = {"content-type": "application/json"}
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise ConfigError(f"agent.api_key_env: the environment variable {api_key_env} is not set")
            headers["authorization"] = f"Bearer {key}"
        self.url = url

        self.breaker = Breaker("agent.url", url)  # fed by the runner: a dead agent stops the run
        self.client = httpx.Client(timeout=timeout_s, headers=headers,
                                   limits=httpx.Limits(max_connections=max_connections))

    def __call__(self, example: Example) -> Any:
        body: dict[str, Any] = {"query": example.query}
        if example.session_id is not None:
            body["session_id"] = example.session_id
        if example.history is not None:
            body["history"] = example.history
        reply = self.client.post(self.url, json=body)
        if reply.status_code >= 300:
            excerpt = " ".join(reply.text.split())[:200]
            raise AgentCallError(f"HTTP {reply.status_code} from {self.url}: {excerpt}",
                                 retryable=reply.status_code == 429 or reply.status_code >= 500 and reply.status_code != 501,
                                 status=reply.status_code)
        try:
            return reply.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise AgentCallError(f"reply from {self.url} is not JSON: {' '.join(reply.text.split())[:120]!r}") from None

    @staticmethod
    def endpoint_failure(exc: BaseException) -> bool | None:
        """For the breaker: True for connection-level failures and 401/403/404, False for other
        failures (timeouts, 5xx), None when the agent answered (a bad reply to this query)."""
        if isinstance(exc, httpx.TimeoutException):
            return False
        if isinstance(exc, httpx.TransportError):
            return True
        status = getattr(exc, "status", None)
        if status is None:
            return None
        return True if status in (401, 403, 404) else False if status >= 429 else None

    @staticmethod
    def retryable(exc: BaseException) -> bool:
        if isinstance(exc, AgentCallError):
            return exc.retryable
        return isinstance(exc, (httpx.TransportError, httpx.TimeoutException))

    def signature(self) -> str:
        return f"agent:http|url:{self.url}"
