"""Traces exported by OpenTelemetry as OTLP JSON files (``data.traces.files``), read file after file
(the format: :mod:`ragmem.data.otlp`)."""

from __future__ import annotations

from datetime import datetime
from typing import Iterator

from ragmem.config.loading import RunConfig
from ragmem.config.trace_settings import TracesSettings
from ragmem.data import otlp
from ragmem.data.spans import Trace
from ragmem.runtime.home import ragmem_home


class OtlpFiles:
    kind = "otlp"
    timed = False  # the files hold what they hold: no window unless one is set

    def __init__(self, settings: TracesSettings, cfg: RunConfig):
        self.settings = settings

    @staticmethod
    def claims(settings: TracesSettings) -> bool:
        return bool(settings.files)

    @property
    def where(self) -> str:
        return f"the files {', '.join(self.settings.files)}"

    def check(self) -> None:
        """Nothing to ask: a file that is not there is named when it is read."""

    def read(self, since: datetime | None, until: datetime | None) -> Iterator[Trace]:
        s, kept = self.settings, 0
        spill = ragmem_home() / "traces"  # (the spans grouped on disk while a file is read: beside the traces' table)
        spill.mkdir(parents=True, exist_ok=True)
        for path in s.files:
            for trace in otlp.read(path, since=since, until=until, share=s.sample, seed=s.seed, limit=s.max - kept,
                                   spill_dir=spill):
                kept += 1
                yield trace
