"""A failing endpoint is named at once while it is retried, then every 10 s, never a minute of a
bar that does not move (issue 60, point 8)."""

from __future__ import annotations

import logging

from ragmem.clients import endpoints
from ragmem.clients.endpoints import Breaker


def test_failures_are_said_at_once_then_every_ten_seconds(monkeypatch, caplog):
    now = [1000.0]
    monkeypatch.setattr(endpoints.time, "monotonic", lambda: now[0])
    breaker = Breaker("judge.base_url", "http://u:pw@127.0.0.1:9/v1", consecutive=50, window=100)
    with caplog.at_level(logging.WARNING, logger="ragmem"):
        breaker.failure("cannot connect", endpoint_failure=True)
        now[0] += 3
        breaker.failure("cannot connect", endpoint_failure=True)
        breaker.failure("cannot connect", endpoint_failure=True)
        now[0] += 8
        breaker.failure("HTTP 503", endpoint_failure=True)
    said = [r.getMessage() for r in caplog.records]
    assert said == ["judge.base_url http://u:***@127.0.0.1:9/v1: 1 request failed (last: cannot connect); retrying",
                    "judge.base_url http://u:***@127.0.0.1:9/v1: 3 requests failed (last: HTTP 503); retrying"]


def test_nothing_more_is_said_once_the_breaker_opened(caplog):
    breaker = Breaker("judge.base_url", "http://127.0.0.1:9/v1", consecutive=2)
    with caplog.at_level(logging.WARNING, logger="ragmem"):
        breaker.failure("cannot connect", endpoint_failure=True)
        breaker.failure("cannot connect", endpoint_failure=True)
        breaker.failure("cannot connect", endpoint_failure=True)
    assert breaker.open and len(caplog.records) == 1  # (the run's own line says the rest)
