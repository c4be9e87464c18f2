"""ragmem's working folder and the journal a run writes as it goes, which is what a resume reads.

``$RAGMEM_HOME/runs/<run id>/`` holds:

- ``agent_outputs.jsonl``: one JSON line per agent output, written (and flushed) the moment the
  output is known, and fsync'd at the end of every batch, so a power cut loses at most one batch and
  a Ctrl+C loses nothing that was answered. Logged as an artifact of the run at the end. A line the
  disk had no room for is taken back and written again on the home's reserve (:mod:`ragmem.runtime.space`),
  and a line cut short by a crash is cut off when the journal is opened again.
- ``run.json``: what the run was started with (the resolved config, secrets masked, and the data's
  sha256), so ``--resume`` can refuse a different config.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from dataclasses import fields
from pathlib import Path
from typing import Any

from ragmem.runtime import space
from ragmem.runtime.home import ragmem_home
from ragmem.schema import AgentOutput, Context

JOURNAL_NAME = "agent_outputs.jsonl"
META_NAME = "run.json"
PARTS_NAME = "agent_outputs.parts"  # chunks answered on Dask workers, one journal each


def run_folder(key: str) -> Path:
    return ragmem_home() / "runs" / key


def _output(line: dict[str, Any]) -> AgentOutput:
    contexts = [Context(**c) for c in line.pop("contexts", [])]
    return AgentOutput(contexts=contexts, **line)


class Journal:
    """Append-only JSON lines of :class:`AgentOutput`, one folder per run: ``key`` is the MLflow run
    id, or ``untracked-<hex>`` for an untracked run. A new journal starts empty; ``resume=True``
    opens the existing one and keeps what it holds."""

    def __init__(self, key: str | None, resume: bool = False):
        self.key = key or f"untracked-{uuid.uuid4().hex[:12]}"
        self.folder = run_folder(self.key)
        self.path = self.folder / JOURNAL_NAME
        self.folder.mkdir(parents=True, exist_ok=True)
        if not resume:
            self.path.unlink(missing_ok=True)
        elif self.path.is_file():
            _cut_torn_line(self.path)
        space.hold_reserve()  # room for what is in flight when the disk fills
        self._file = open(self.path, "ab", buffering=0)
        self._lock = threading.Lock()
        self.written = 0

    # -- what the run started with --------------------------------------------------------------

    @staticmethod
    def folder_for(key: str) -> Path:
        return run_folder(key)

    @staticmethod
    def has_meta(key: str) -> bool:
        return (run_folder(key) / META_NAME).is_file()

    @staticmethod
    def read_meta_for(key: str) -> dict[str, Any] | None:
        path = run_folder(key) / META_NAME
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    @staticmethod
    def write_meta_for(key: str, meta: dict[str, Any]) -> None:
        """``run.json`` of a run that journals no outputs itself (a sweep parent)."""
        folder = run_folder(key)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / (META_NAME + ".tmp")
        tmp.write_text(json.dumps(meta, ensure_ascii=False, indent=1, default=str), encoding="utf-8")
        os.replace(tmp, folder / META_NAME)

    def write_meta(self, meta: dict[str, Any]) -> None:
        self.write_meta_for(self.key, meta)

    def read_meta(self) -> dict[str, Any] | None:
        return self.read_meta_for(self.key)

    # -- outputs --------------------------------------------------------------------------------

    def append(self, output: AgentOutput) -> None:
        """One output, whole (from any thread: the agent's workers keep their replies themselves).

        ``json``, not orjson (twice as fast here): orjson has CPython keep a UTF-8 copy inside every
        non-ASCII string it writes, and an output's texts live to the run's end (10,000 bilingual
        replayed answers: 9.6 MB more at the run's peak, for 0.35 s less)."""
        line = (json.dumps(_as_record(output), ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            self._write(line)
            self.written += 1

    def _write(self, data: bytes) -> None:
        """``data`` at the journal's end, whole: a write the disk had no room for is cut back to where
        it began and made again on the reserve (:func:`ragmem.runtime.space.kept`), never left half."""
        start = os.fstat(self._file.fileno()).st_size

        def write() -> None:
            view = memoryview(data)
            while view:
                view = view[self._file.write(view):]

        space.kept(write, self.path, undo=lambda: os.ftruncate(self._file.fileno(), start))

    def adopt(self, key: str) -> dict[str, AgentOutput]:
        """The answered outputs of the journal ``key`` (another run's), journaled as this run's own
        (not counted in ``written``: they were not asked of the agent here)."""
        other = Journal(key, resume=True)
        try:
            outputs = {k: v for k, v in other.outputs().items() if v.error is None}
        finally:
            other.close()
        self._write("".join(json.dumps(_as_record(output), ensure_ascii=False) + "\n"
                            for output in outputs.values()).encode("utf-8"))
        self.sync()
        return outputs

    def sync(self) -> None:
        """The end of a batch: everything written is on disk."""
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self.sync()
            self._file.close()

    @classmethod
    def part(cls, folder: Path, index: int) -> "Journal":
        """The journal of one chunk answered elsewhere (a Dask worker: :func:`ragmem.run.batching.score_bounds`),
        a file of its own in the run's folder, started anew; :meth:`absorb_parts` adds it to the run's."""
        journal = cls.__new__(cls)
        journal.key, journal.folder = folder.name, folder
        journal.path = folder / PARTS_NAME / f"chunk-{index:05d}.jsonl"
        journal.path.parent.mkdir(parents=True, exist_ok=True)
        journal._file = open(journal.path, "wb", buffering=0)
        journal._lock = threading.Lock()
        journal.written = 0
        return journal

    def _parts(self) -> list[Path]:
        return sorted((self.folder / PARTS_NAME).glob("chunk-*.jsonl"))

    def absorb_parts(self) -> None:
        """The chunks' journals (:meth:`part`) appended to this one, in their order, and removed."""
        for path in self._parts():
            with open(path, "rb") as part:
                for line in part:
                    self._write(line)
                    self.written += 1
            path.unlink()
        self.sync()

    def outputs(self) -> dict[str, AgentOutput]:
        """The journaled outputs by example id, the chunks' journals not yet absorbed included (a
        line cut short by a crash is skipped)."""
        found: dict[str, AgentOutput] = {}
        for path in [self.path, *self._parts()]:
            if path.is_file():
                self._read(path, found)
        return found

    @staticmethod
    def _read(path: Path, found: dict[str, AgentOutput]) -> None:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                try:
                    output = _output(json.loads(line))
                except (ValueError, TypeError):
                    continue  # the last line of a journal cut off mid-write
                found[output.example_id] = output


def _cut_torn_line(path: Path, block: int = 1 << 16) -> None:
    """Cut off a last line the disk or a crash left without its end (what follows the last newline),
    so the next line is not glued to it."""
    with open(path, "rb+") as file:
        size = file.seek(0, os.SEEK_END)
        end = size
        while end > 0:
            start = max(0, end - block)
            file.seek(start)
            chunk = file.read(end - start)
            at = chunk.rfind(b"\n")
            if at >= 0:
                end = start + at + 1
                break
            end = start
        if end < size:
            file.truncate(end)


_OUTPUT_FIELDS = tuple(f.name for f in fields(AgentOutput))
_CONTEXT_FIELDS = tuple(f.name for f in fields(Context))


def _as_record(output: AgentOutput) -> dict[str, Any]:
    """``dataclasses.asdict`` of an output, without its deep copy of every value (a third of the
    time of replaying 10k examples went there)."""
    record = {name: getattr(output, name) for name in _OUTPUT_FIELDS}
    record["contexts"] = [{name: getattr(c, name) for name in _CONTEXT_FIELDS} for c in output.contexts]
    return record
