"""The ``alerts:`` section: who hears of a run that failed its gates, drifted, failed outright or lost
too many of its calls, and how (:mod:`ragmem.run.alerting` says what, :mod:`ragmem.orchestration.notify`
delivers). Part of the settings schema (:mod:`ragmem.config.settings`).

    alerts:
      to: [json://127.0.0.1:8080/hook, "slack://T000/B000/XXXX/#evals", prefect-block://team-slack]
      on: [gate_failed, drift, run_failed]    # the default; errors too: a share of failed calls above errors_over
      errors_over: 0.05

A destination is an Apprise URL (Slack, Teams, email, ntfy, a JSON webhook...) or a Prefect
notification block by name (``prefect-block://NAME``). Its text carries tokens: every destination is
held as a secret (:func:`ragmem.config.secrets.remember`), masked to its scheme wherever ragmem writes.
"""

from __future__ import annotations

import logging
from typing import Literal, Optional

from pydantic import field_validator, model_validator

from ragmem.config.sections import Section, Share, setting

#: what may be alerted on (``alerts.on``)
EVENTS = ("gate_failed", "drift", "run_failed", "errors")
#: a Prefect notification block, by name, instead of an Apprise URL
PREFECT_BLOCK = "prefect-block://"


def apprise_quiet():
    """Apprise, its own logger muted: its lines quote a destination's URL, which is a secret (a failure
    is said by ragmem, masked to its scheme)."""
    import apprise  # (only a config or a run with alerts: 0.1 s)

    logging.getLogger("apprise").disabled = True
    return apprise


def scheme_of(url: str) -> str:
    """What of a destination may be shown: its scheme (``slack://…``)."""
    return url.split("://", 1)[0] + "://…" if "://" in url else "…"


class AlertSettings(Section):
    to: list[str] = setting([], "where alerts go: Apprise URLs (json://, slack://, mailto://, ntfy://...) or "
                                "prefect-block://NAME (a Prefect notification block); held as secrets")
    on: list[Literal[EVENTS]] = setting(["gate_failed", "drift", "run_failed"],  # type: ignore[valid-type]  # (declared once)
                                        "the events alerted on: gate_failed, drift, run_failed, errors")
    errors_over: Optional[Share] = setting(
        None, "alert (event errors) when the share of failed agent calls or judgements is above this")

    @model_validator(mode="before")
    @classmethod
    def _yaml_on(cls, data):
        """YAML 1.1 reads a bare ``on:`` key as true: the setting is ``on`` all the same."""
        if isinstance(data, dict) and True in data and "on" not in data:
            data = {("on" if k is True else k): v for k, v in data.items()}
        return data

    @field_validator("to")
    @classmethod
    def _urls(cls, value: list[str]) -> list[str]:
        for i, url in enumerate(value):
            if url.startswith(PREFECT_BLOCK):
                if not url[len(PREFECT_BLOCK):].strip():
                    raise ValueError(f"[{i}]: prefect-block:// needs the block's name (prefect-block://NAME)")
                continue
            if not apprise_quiet().Apprise().add(url):
                raise ValueError(f"[{i}]: {scheme_of(url)} is not a notification URL Apprise knows (e.g. "
                                 "json://HOST:PORT/PATH, slack://TOKEN_A/TOKEN_B/TOKEN_C, mailto://USER@HOST)")
        return value

    @model_validator(mode="after")
    def _errors(self):
        if "errors" in self.on and self.errors_over is None:
            raise ValueError("on: errors needs errors_over (the share of failed calls above which to alert)")
        return self
