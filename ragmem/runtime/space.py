"""A full disk: one line naming the path and the space left, exit 3, and nothing paid for lost.

Where a run writes (the journal and the judge cache in the ragmem home, the MLflow store, the
report, ``--output``) the disk can fill at any moment. What was paid for is written first:

- a **reserve** of up to :data:`RESERVE_BYTES` is held in the ragmem home from the moment a run
  opens its journal (``<home>/reserve``, a file of zeros, at most half of the space then free);
- a write there that fails for want of space (:func:`kept`) releases the reserve, is made again on
  the space freed, and marks the run **full** (:func:`mark_full`): the answer or verdict just paid
  for is kept;
- the run's loops check (:func:`check`) between calls and batches and stop as an interrupt does:
  no new call starts, the calls in flight are waited for and journaled (on what is left of the
  reserve), then :class:`DiskFull` ends the command: one line, exit 3, the resume hint;
- a failure for want of space anywhere else (the store's database or artifacts, the report) is named
  by :func:`disk_full` and :func:`as_disk_full` turns it into that same line.

Once space is back, ``ragmem run ... --resume ID`` answers only what the journal lacks and the
judge cache serves every verdict already paid for.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from ragmem.errors import RagmemError
from ragmem.runtime.home import ragmem_home

#: the reserve a run holds in the ragmem home: room for the journal lines and cache entries of the
#: calls in flight when the disk fills. A journal line is ~0.3-3 KB; a cached verdict grows the judge
#: cache's SQLite write-ahead log by ~24 KB until the log reaches its checkpoint size (~4 MB), measured
#: here: a 1 MB reserve kept 33 verdicts, fewer than one batch of a run judging 64 at a time
RESERVE_BYTES = 8 << 20
RESERVE_NAME = "reserve"
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
#: how the libraries under a run word a full disk when they do not raise an OSError with its errno
#: (SQLite through SQLAlchemy and MLflow, pyarrow's writers)
_FULL_WORDS = ("database or disk is full", "no space left on device", "disk quota exceeded")

T = TypeVar("T")
_lock = threading.Lock()
_full: list[tuple[str, int | None]] = []  # the first write that found the disk full in this process: (path, bytes free then)


class DiskFull(RagmemError):
    """The disk under ``path`` is full: the run stopped with what it had paid for kept (exit 3)."""

    exit_code = 3

    def __init__(self, path: str | Path, detail: str = "", free: int | None = None,
                 way_out: str = "free some space (what was paid for is kept)"):
        self.path = str(path)
        free = free_bytes(path) if free is None else free
        where = f"{free_text(free)} free on its file system" if free is not None else "its file system cannot be read"
        super().__init__(f"the disk is full: {self.path} ({where}){detail}; {way_out}")


def free_bytes(path: str | Path) -> int | None:
    """Bytes free to an unprivileged writer on the file system of ``path`` (its nearest existing
    folder), or ``None`` when it cannot be read."""
    try:
        return shutil.disk_usage(_nearest(path)).free
    except OSError:
        return None


def _nearest(path: str | Path) -> Path:
    here = Path(path)
    while not here.exists() and here != here.parent:
        here = here.parent
    return here


def free_text(n: int) -> str:
    """``0 B``, ``12 KB``, ``3.4 MB``, ``1.2 GB``."""
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}" if n < 10 * size else f"{n // size} {unit}"
    return f"{n} B"


def disk_full(exc: BaseException | None) -> BaseException | None:
    """The failure for want of space inside ``exc`` (itself, or an error it was raised from), or ``None``."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, DiskFull) or (isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS):
            return exc
        if any(words in str(exc).lower() for words in _FULL_WORDS):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__ or getattr(exc, "orig", None)
    return None


def as_disk_full(exc: BaseException, places: Iterable[str | Path]) -> DiskFull | None:
    """``exc`` as a :class:`DiskFull` naming its path: the file the error names, else (SQLite, which
    does not name its file) the fullest of ``places`` (the store's database, the artifact root, the
    ragmem home); ``None`` when ``exc`` is not a full disk."""
    found = disk_full(exc)
    if found is None:
        return None
    if isinstance(found, DiskFull):
        return found
    named = getattr(found, "filename", None)
    if named:
        return DiskFull(named)
    if _full:
        return DiskFull(_full[0][0], free=_full[0][1])
    database = "database or disk is full" in str(found).lower()  # (SQLite: its database, on a tie)
    # free space is read once per file system: places on one disk tie exactly, even while other
    # writers change what is free between two reads (CI of e1c97c2 named the artifacts so)
    by_disk: dict[int, int | None] = {}
    known = []
    for place in places:
        here = _nearest(place)
        try:
            disk = here.stat().st_dev
        except OSError:  # (its file system cannot be read: neither can its free space)
            continue
        if disk not in by_disk:
            by_disk[disk] = free_bytes(here)
        if by_disk[disk] is not None:
            known.append((by_disk[disk], Path(place).suffix != ".db" if database else Path(place).suffix == ".db", str(place)))
    return DiskFull(min(known)[2] if known else "?")


def places(tracking_uri: str, artifact_root: str, *stores: str | None) -> list[Path]:
    """Where a run writes, for naming the one whose disk filled when the error does not (SQLite):
    the ragmem home, the store's database (a local one), the artifact root (a local one), and the
    other ``stores`` it writes to (the trace store its assessments are written back to)."""
    found = [ragmem_home()]
    for where in (tracking_uri.removeprefix("sqlite:///"), str(artifact_root).removeprefix("file://"),
                  *(s.removeprefix("sqlite:///") for s in stores if s)):
        if where and "://" not in where:
            found.append(Path(where))
    return found


def reserve_bytes() -> int:
    """``RAGMEM_DISK_RESERVE`` (bytes; ``0``: no reserve), else :data:`RESERVE_BYTES`; checked by
    :func:`ragmem.exits.check_environment` (another value is one line, exit 2)."""
    given = os.environ.get("RAGMEM_DISK_RESERVE", "").strip()
    return int(given) if given.isdigit() else RESERVE_BYTES


def reserve_path() -> Path:
    return ragmem_home() / RESERVE_NAME


def hold_reserve() -> None:
    """Hold the reserve in the ragmem home (kept if already there): up to :data:`RESERVE_BYTES`, at
    most half of what is free, allocated without writing it where the file system can; nothing when
    the space cannot be had (the run's own writes then meet the full disk first, and stop it the same way)."""
    path = reserve_path()
    with _lock:
        try:
            if path.is_file() and path.stat().st_size > 0:
                return
            free = free_bytes(path.parent) or 0
            size = min(reserve_bytes(), free // 2) // 4096 * 4096
            if size <= 0:
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as file:
                try:
                    os.posix_fallocate(file.fileno(), 0, size)
                except (AttributeError, OSError) as exc:  # (a file system without it: written)
                    if isinstance(exc, OSError) and disk_full(exc) is not None:
                        raise
                    file.write(b"\0" * size)
                    file.flush()
        except OSError:
            path.unlink(missing_ok=True)


def release_reserve() -> int:
    """Free the reserve; the bytes freed (0 when none was held)."""
    path = reserve_path()
    try:
        size = path.stat().st_size
        path.unlink()
        return size
    except OSError:
        return 0


def reset() -> None:
    """A new run (or sweep) starts: no write has found the disk full yet. Not on another thread than
    the main one (a sweep's children: the flag is the sweep's, reset at its start)."""
    if threading.current_thread() is threading.main_thread():
        with _lock:
            _full.clear()


def mark_full(path: str | Path) -> None:
    """The disk under ``path`` filled: the run stops at its next :func:`check`."""
    free = free_bytes(path)
    with _lock:
        if not _full:
            _full.append((str(path), free))


def full() -> str | None:
    """The path that found the disk full in this process, or ``None``."""
    return _full[0][0] if _full else None


def check() -> None:
    """Raise :class:`DiskFull` once a write found the disk full (called between calls and batches)."""
    if _full:
        raise DiskFull(_full[0][0], free=_full[0][1])


def kept(write: Callable[[], T], path: str | Path, undo: Callable[[], None] | None = None) -> T:
    """``write()``; should it fail for want of space: ``undo()`` (what it left half-written), the
    reserve released, the run marked full, and ``write()`` once more on the space freed. Raises
    :class:`DiskFull` when that fails too; other errors pass as they are."""
    try:
        return write()
    except Exception as exc:
        _undo_if_full(exc, undo)
        mark_full(path)  # (the space free now, before the reserve's is added)
        release_reserve()
    try:
        return write()
    except Exception as exc:
        _undo_if_full(exc, undo)
        raise DiskFull(path, "; the reserve held for the work in flight was not enough") from exc


def _undo_if_full(exc: Exception, undo: Callable[[], None] | None) -> None:
    """Re-raise ``exc`` unless it is a full disk; then ``undo()`` what the write left half-done."""
    if disk_full(exc) is None:
        raise exc
    if undo is not None:
        undo()
