"""Spans grouped into traces on disk: an OTLP export lists spans in any order (a trace's spans may be
anywhere in the file), and its traces are read in the order they started, so every span must be
seen before the first trace is given. Held in memory, a 500 MB export took 1.55 GB; here each span
goes to a temporary SQLite file as it is read (pickled: the file is this process's own, deleted
when the traces have been read), and SQLite sorts and groups them on disk with a bounded cache.

>>> from ragmem.data.spans import Span
>>> with SpanSpill() as spill:
...     spill.add("b", Span("s2", None, "late", "CHAIN", 2_000_000, None), {"session_id": "s"})
...     spill.add("a", Span("s1", None, "early", "CHAIN", 1_000_000, None), {})
...     [(t, start, [s.name for s in spans], meta) for t, start, spans, meta in spill.traces()]
[('a', 1, ['early'], {}), ('b', 2, ['late'], {'session_id': 's'})]
"""

from __future__ import annotations

import pickle
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Iterator

from ragmem.data.spans import Span

CACHE_KIB = 32 * 1024  # SQLite's page cache (and its sorter's memory) for the spill: 32 MiB
BATCH = 2_000  # spans inserted at a time


class SpanSpill:
    """Spans added as they are read (:meth:`add`), traces given back in start order (:meth:`traces`)."""

    def __init__(self, folder: str | Path | None = None):
        self.folder = Path(tempfile.mkdtemp(prefix="ragmem-spans-", dir=folder))
        self.db = sqlite3.connect(self.folder / "spans.db", isolation_level=None)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", f"cache_size=-{CACHE_KIB}", "temp_store=FILE"):
            self.db.execute(f"PRAGMA {pragma}")
        self.db.execute("CREATE TABLE spans (trace TEXT NOT NULL, start INTEGER NOT NULL, span BLOB NOT NULL, "
                        "meta BLOB)")
        self.pending: list[tuple[str, int, bytes, bytes | None]] = []

    def __enter__(self) -> SpanSpill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def add(self, trace_id: str, span: Span, meta: dict[str, str]) -> None:
        """One span of trace ``trace_id``; ``meta``: what the span says of its trace (session, user)."""
        self.pending.append((trace_id, span.start_ns, pickle.dumps(span, protocol=5),
                             pickle.dumps(meta, protocol=5) if meta else None))
        if len(self.pending) >= BATCH:
            self._flush()

    def _flush(self) -> None:
        self.db.executemany("INSERT INTO spans VALUES (?, ?, ?, ?)", self.pending)
        self.pending.clear()

    def traces(self, since_ms: float | None = None, until_ms: float | None = None
               ) -> Iterator[tuple[str, int, list[Span], dict[str, str]]]:
        """Each trace whose first span started in ``[since_ms, until_ms)`` (its start in whole ms): its id, start (ms), spans
        (in the order they were added) and meta (each key as its first span that says it), ordered by
        start, then id."""
        self._flush()
        self.db.execute("CREATE INDEX by_trace ON spans (trace)")
        rows = self.db.execute(
            "SELECT s.trace, t.first, s.span, s.meta FROM spans s JOIN "
            "(SELECT trace, MIN(start) AS first FROM spans GROUP BY trace "
            " HAVING first / 1000000 >= ? AND first / 1000000 < ?) t ON s.trace = t.trace "
            "ORDER BY t.first, s.trace, s.rowid",
            (-1e300 if since_ms is None else since_ms, 1e300 if until_ms is None else until_ms))
        current: str | None = None
        first, spans, meta = 0, list[Span](), dict[str, str]()
        for trace, start, span, said in rows:
            if trace != current:
                if current is not None:
                    yield current, first // 1_000_000, spans, meta
                current, first, spans, meta = trace, start, [], {}
            spans.append(pickle.loads(span))
            for key, value in (pickle.loads(said) if said else {}).items():
                meta.setdefault(key, value)
        if current is not None:
            yield current, first // 1_000_000, spans, meta
