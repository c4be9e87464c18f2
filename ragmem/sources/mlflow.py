"""Traces an application logged to an MLflow experiment (``data.traces.experiment``), read page by
page from its tracking store (``data.traces.tracking_uri``, else the run's): the MLflow calls are
:mod:`ragmem.tracking.traces`'."""

from __future__ import annotations

from datetime import datetime
from typing import Iterator

from ragmem.clients import endpoints
from ragmem.config.loading import RunConfig
from ragmem.config.trace_settings import TracesSettings
from ragmem.data.spans import Trace
from ragmem.tracking import traces
from ragmem.tracking.uri import check_readable


class MlflowExperiment:
    kind = "mlflow"
    timed = True  # traces arrive over time: a window without until ends now

    def __init__(self, settings: TracesSettings, cfg: RunConfig):
        self.settings = settings
        self.uri = settings.tracking_uri or cfg.tracking_uri
        self.experiment = str(settings.experiment)

    @staticmethod
    def claims(settings: TracesSettings) -> bool:
        return bool(settings.experiment)

    @property
    def where(self) -> str:
        return f"experiment {self.experiment!r}"

    def check(self) -> None:
        """The store is one and answers (a server that is down, a SQLite file that is missing, is not a
        database or holds no MLflow tables: one line naming the setting)."""
        setting = "data.traces.tracking_uri" if self.settings.tracking_uri else "tracking.uri"
        endpoints.check_store(self.uri, setting)
        check_readable(self.uri, setting)

    def read(self, since: datetime | None, until: datetime | None) -> Iterator[Trace]:
        s = self.settings
        yield from traces.read(self.uri, self.experiment, since=since, until=until, filter=s.filter, limit=s.max,
                               share=s.sample, seed=s.seed, page_size=s.page_size)

    def ids(self, since: datetime | None, until: datetime | None) -> set[str]:
        """The ids of the traces in ``[since, until)`` now, listed without their spans."""
        s = self.settings
        return traces.listed(self.uri, self.experiment, since=since, until=until, filter=s.filter, share=s.sample,
                             seed=s.seed, page_size=s.page_size)
