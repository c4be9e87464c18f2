"""An agent behind an HTTP endpoint.

Request: ``POST agent.url`` with JSON ``{"query", "session_id"?, "history"?}`` (and the header
``Authorization: Bearer $<agent.api_key_env>`` when that variable is named). Reply: JSON
``{"answer", "contexts": [...], "timings"?: {stage: seconds}}``. Calls follow the one call policy
(:mod:`ragmem.clients.calls`): connection errors, timeouts and 5xx/429 replies are retried (``agent.retries``,
``Retry-After`` honoured), every attempt feeds the endpoint's breaker; what still fails, and any other
non-2xx or malformed reply, is recorded for that example.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from ragmem.clients.endpoints import Breaker
from ragmem.config.secrets import mask_url
from ragmem.errors import ConfigError
from ragmem.schema import Example


class AgentCallError(Exception):
    """The endpoint answered, but not with a usable reply (``status``: a non-2xx one, classified by
    :mod:`ragmem.clients.calls`)."""

    def __init__(self, message: str, status: int | None = None, reply_text: str | None = None,
                 retry_after: str | None = None):
        super().__init__(message)
        self.status, self.reply_text, self.retry_after = status, reply_text, retry_after


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
        self.shown = mask_url(url)  # what messages and the signature show: its secrets masked
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
            raise AgentCallError(f"HTTP {reply.status_code} from {self.shown}: {excerpt}", status=reply.status_code,
                                 reply_text=excerpt, retry_after=reply.headers.get("retry-after"))
        try:
            return reply.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise AgentCallError(f"reply from {self.shown} is not JSON: {' '.join(reply.text.split())[:120]!r}") from None

    def signature(self) -> str:
        return f"agent:http|url:{self.shown}"
