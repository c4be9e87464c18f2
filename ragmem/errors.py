"""The exceptions ragmem raises for mistakes a user can fix.

    RagmemError                 base class: the CLI prints ``error: <message>`` and exits 2
    ├── ConfigError             a config file, a ``--set`` override or a setting is wrong
    ├── DataError               a dataset file or record is wrong (names file, record, field)
    └── AgentLoadError          the agent named in the config cannot be imported or built

    Terminated (a KeyboardInterrupt)  SIGTERM during a tracked run: the run is marked KILLED

Failures of a single agent call or judge call are *not* exceptions at this level: they are recorded
per example (``error`` column) and counted, and the run goes on.
"""

from __future__ import annotations


class RagmemError(Exception):
    """Base class of every error caused by user input; never shown with a traceback."""


class ConfigError(RagmemError):
    """A configuration value is missing, of the wrong type or out of range."""


class DataError(RagmemError):
    """A dataset file cannot be read, or one of its records is invalid."""

    def __init__(self, file: str, message: str, record: int | None = None, field: str | None = None):
        self.file, self.record, self.field, self.detail = file, record, field, message
        super().__init__(format_location(file, record, field) + message)


class AgentLoadError(RagmemError):
    """The agent spec (``module:function``) does not resolve to a callable."""


def format_location(file: str, record: int | None = None, field: str | None = None) -> str:
    """``file: record 3: field 'query': `` — the prefix every data message starts with."""
    parts = [str(file)]
    if record is not None:
        parts.append(f"record {record}")
    if field is not None:
        parts.append(f"field '{field}'")
    return ": ".join(parts) + ": "


def escaped_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (half of a character pair, which no file can hold) shown as
    its escape, ``\\ud800``; any other text as it is.

    >>> escaped_surrogates("half \\ud800 pair 😀")
    'half \\\\ud800 pair 😀'
    """
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def failure_message(exc: BaseException) -> str:
    """``Type: first line of the message`` (or ``Type``): how a failure is recorded per item or run;
    half of a character pair in it (a lone surrogate, which no file can hold) shown escaped.

    >>> failure_message(ValueError("upstream said \\ud800\\nmore"))
    'ValueError: upstream said \\\\ud800'
    """
    text = escaped_surrogates(str(exc).strip())
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


class Stopped(Exception):
    """A command's run was interrupted (Ctrl+C, SIGTERM): carried past click, which would swallow a
    KeyboardInterrupt, to the CLI's one line and exit code (130, or 143 for SIGTERM)."""

    def __init__(self, interrupt: KeyboardInterrupt):
        super().__init__(str(interrupt))
        self.exit_code = 143 if isinstance(interrupt, Terminated) else 130
        self.ragmem_progress = getattr(interrupt, "ragmem_progress", None)


class Terminated(KeyboardInterrupt):
    """The process was asked to stop (SIGTERM) during a tracked run; handled like Ctrl+C."""


class RunFailed(RagmemError):
    """A run that ended and was stored, but in which nothing could be measured: every agent call or
    every judge reply failed (exit code 3, as an endpoint that stopped answering)."""

    exit_code = 3
