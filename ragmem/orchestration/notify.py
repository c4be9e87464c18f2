"""Delivering alerts (``alerts.to``; what they say: :mod:`ragmem.run.alerting`): through Apprise, the
ecosystem's notifier (one URL a destination: Slack, Teams, email, ntfy, a JSON webhook...), or a
Prefect notification block by name (``prefect-block://NAME``). A destination that fails is said in
one line (its scheme only: the rest of its URL is a secret) and never fails the run it reports on."""

from __future__ import annotations

import logging
from typing import Any, Sequence

from ragmem.config.alert_settings import apprise_quiet, PREFECT_BLOCK, scheme_of
from ragmem.config.secrets import scrub

log = logging.getLogger("ragmem")


def _one(url: str, title: str, body: str) -> str | None:
    """Send to one destination; ``None`` when delivered, else why not."""
    try:
        if url.startswith(PREFECT_BLOCK):
            from prefect.blocks.notifications import NotificationBlock  # (only a prefect-block destination)

            block: Any = NotificationBlock.load(url[len(PREFECT_BLOCK):])  # (sync: outside an event loop)
            block.notify(body, subject=title)
            return None
        sender = apprise_quiet().Apprise()
        sender.add(url)
        return None if sender.notify(body=body, title=title) else "not delivered (the service refused or did not answer)"
    except Exception as exc:  # a destination that fails is said, never the run's end
        return scrub(f"{type(exc).__name__}: {exc}")


def send(urls: Sequence[str], title: str, body: str, warn: bool = True) -> list[str]:
    """``title`` and ``body`` to every destination; one line for each that failed (logged as a
    warning unless ``warn`` is false: the caller says them)."""
    failed = []
    for url in urls:
        problem = _one(url, title, body)
        if problem is not None:
            failed.append(f"alert not delivered to {scheme_of(url)}: {problem}")
            if warn:
                log.warning("%s", failed[-1])
    return failed


def deliver(urls: Sequence[str], found: Sequence[tuple[str, str, str]]) -> list[str]:
    """Each ``(event, title, body)`` of :mod:`ragmem.run.alerting` to every destination; the lines of
    those not delivered."""
    failed: list[str] = []
    for _, title, body in found if urls else []:
        failed += send(urls, title, body)
    return failed
