"""Where production traces come from (``data.traces``): each source reads a window of traces and
yields them mapped to :class:`ragmem.data.spans.Trace` (spans, session, tokens), the one shape the
rest of the run reads (:func:`ragmem.data.spans.to_record` makes a record of each).

=====================  =========================================  =================================
source                 chosen when the config sets                module
=====================  =========================================  =================================
``mlflow``             ``data.traces.experiment``                 :mod:`ragmem.sources.mlflow`
``otlp``               ``data.traces.files``                      :mod:`ragmem.sources.otlp`
=====================  =========================================  =================================

A source is a class with ``kind`` (its name), ``claims(settings)`` (whether the settings name it),
``where`` (what it reads, for messages), ``timed`` (its traces arrive over time: a window without
``until`` ends now; files hold what they hold), ``check()`` (before any work: a store that does not
answer is one line) and ``read(since, until)``. :func:`source_for` asks :data:`SOURCES` in order.
Adding one (a Langfuse or Phoenix export): a module here with its class, and one line in
:data:`SOURCES` (``docs/development.md``: How to add a trace source).
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterator, Protocol, Sequence

from ragmem.config.loading import RunConfig
from ragmem.config.trace_settings import TracesSettings
from ragmem.data.spans import Trace
from ragmem.errors import ConfigError
from ragmem.sources.mlflow import MlflowExperiment
from ragmem.sources.otlp import OtlpFiles

__all__ = ["TraceSource", "SOURCES", "source_for"]


class TraceSource(Protocol):
    """A window of traces from one place (see the module's table)."""

    kind: str
    timed: bool

    @property
    def where(self) -> str: ...

    def check(self) -> None: ...

    def read(self, since: datetime | None, until: datetime | None) -> Iterator[Trace]: ...


class _SourceType(Protocol):
    kind: str

    @staticmethod
    def claims(settings: TracesSettings) -> bool: ...

    def __call__(self, settings: TracesSettings, cfg: RunConfig) -> TraceSource: ...


#: every source, asked in this order which one the settings name (a new source: one line here)
SOURCES: Sequence[_SourceType] = (MlflowExperiment, OtlpFiles)


def source_for(cfg: RunConfig) -> TraceSource:
    """The source ``data.traces`` names (a ConfigError when none does: no experiment and no files)."""
    settings = cfg.data.traces
    for source in SOURCES:
        if source.claims(settings):
            return source(settings, cfg)
    raise ConfigError("data.traces: name where the traces are (data.traces.experiment, or data.traces.files)")
