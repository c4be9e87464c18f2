"""A full disk in process: a journal line the disk had no room for is taken back and written again on
the reserve, the run is marked full and stops at its next check with one line naming the path; an
error that only words it (SQLite) names the store; the command's line is exit 3 and writes nothing
more to the full disk. (On real file systems, filled: tests/e2e/test_full_disk.py, the stress lane.)"""

from __future__ import annotations

import errno
import os
import sqlite3

import pytest

from ragmem.runtime import space
from ragmem.schema import AgentOutput


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    space.reset()
    yield tmp_path / "home"
    space.reset()


class FillsOnce:
    """A journal's file whose next write puts half its bytes on disk, then finds the disk full."""

    def __init__(self, file):
        self.file, self.armed = file, True

    def write(self, data):
        if self.armed:
            self.armed = False
            self.file.write(bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.file.write(data)

    def __getattr__(self, name):
        return getattr(self.file, name)


def _output(i: int) -> AgentOutput:
    return AgentOutput(f"q{i}", f"answer {i}", [], 0.1, {})


def test_a_line_the_disk_had_no_room_for_is_written_whole_on_the_reserve_and_the_run_stops(home):
    from ragmem.run.journal import Journal

    journal = Journal("run-1")
    reserve = space.reserve_path()
    assert reserve.is_file() and 0 < reserve.stat().st_size <= space.RESERVE_BYTES
    journal.append(_output(0))
    journal._file = FillsOnce(journal._file)
    journal.append(_output(1))  # half written, then the disk full: cut back, written again
    assert not reserve.exists()  # released for it
    assert space.full() == str(journal.path)
    with pytest.raises(space.DiskFull) as stopped:
        space.check()
    assert str(stopped.value).startswith(f"the disk is full: {journal.path} (") and stopped.value.exit_code == 3
    journal.append(_output(2))  # what is in flight is still kept
    journal.close()
    lines = journal.path.read_text().splitlines()
    assert len(lines) == 3 and set(Journal("run-1", resume=True).outputs()) == {"q0", "q1", "q2"}


def test_when_the_reserve_is_not_enough_the_write_is_undone_and_the_line_says_so(tmp_path):
    target = tmp_path / "f"
    target.write_bytes(b"kept\n")

    def write():
        with open(target, "ab") as file:
            file.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(space.DiskFull, match="the reserve held for the work in flight was not enough"):
        space.kept(write, target, undo=lambda: os.truncate(target, 5))
    assert target.read_bytes() == b"kept\n"


def test_other_errors_pass_as_they_are(tmp_path):
    def write():
        raise PermissionError(errno.EACCES, "Permission denied")

    with pytest.raises(PermissionError):
        space.kept(write, tmp_path)
    assert space.full() is None


def test_a_journal_reopened_after_a_torn_last_line_cuts_it_off(home):
    from ragmem.run.journal import Journal

    journal = Journal("run-2")
    journal.append(_output(0))
    journal.close()
    with open(journal.path, "ab") as file:
        file.write(b'{"example_id": "q1", "answ')  # a crash (or a full disk) mid-line
    again = Journal("run-2", resume=True)
    again.append(_output(2))
    again.close()
    assert set(again.outputs()) == {"q0", "q2"}  # q2 not glued to the torn line


def test_sqlite_words_a_full_disk_and_the_store_is_named(tmp_path):
    import sqlalchemy.exc

    db = tmp_path / "mlruns" / "mlflow.db"
    db.parent.mkdir()
    db.write_bytes(b"")
    wrapped = sqlalchemy.exc.OperationalError("INSERT INTO runs ...", {}, sqlite3.OperationalError("database or disk is full"))
    try:
        try:
            raise wrapped
        except Exception as exc:
            raise RuntimeError("Failed to log the run") from exc  # (as MLflow wraps it)
    except RuntimeError as outer:
        full = space.as_disk_full(outer, [tmp_path / "home", db, tmp_path / "mlruns" / "artifacts"])
    assert full is not None and full.path == str(db)  # (the same file system: the database, as SQLite spoke)
    assert space.as_disk_full(ValueError("database is locked"), [db]) is None


def test_places_on_one_disk_tie_while_other_writers_use_it(tmp_path, monkeypatch):
    # CI of e1c97c2: on a busy machine the free space fell between the reads of the three places on
    # one disk, and the last read (the artifacts) was named instead of the database SQLite spoke of
    db = tmp_path / "mlruns" / "mlflow.db"
    db.parent.mkdir()
    db.write_bytes(b"")
    read = space.free_bytes
    falling = iter(range(10**9, 0, -4096))
    monkeypatch.setattr(space, "free_bytes", lambda path: None if read(path) is None else next(falling))
    found = space.as_disk_full(sqlite3.OperationalError("database or disk is full"),
                               [tmp_path / "home", db, tmp_path / "mlruns" / "artifacts", tmp_path / "t.db"])
    assert found is not None and found.path == str(db)  # (the first database: one reading for the disk)


def test_the_command_line_for_a_full_disk_is_one_line_exit_3_and_nothing_written_to_the_home(home, capsys):
    from ragmem import exits

    exc = OSError(errno.ENOSPC, "No space left on device", str(home / "runs" / "x" / "table.parquet"))
    code = exits.finish(exc, ["report", "x"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1
    assert err[0].startswith(f"error: the disk is full: {home}/runs/x/table.parquet (")
    assert not (home / "last-error.log").exists()


def test_an_output_file_on_a_full_disk_names_the_stored_run_and_keeps_the_old_file(tmp_path, monkeypatch):
    from ragmem.cli import common

    target = tmp_path / "summary.json"
    target.write_text('{"old": true}\n')
    real = type(target).write_text

    def full(self, *args, **kwargs):
        if self.name.endswith(".partial"):
            real(self, "{", encoding="utf-8")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(target), "write_text", full)
    with pytest.raises(space.DiskFull) as stopped:
        common.write(target, {"run_id": "abc123", "metrics": {}}, "summary")
    assert "the summary was not written; the run abc123 is stored whole" in str(stopped.value)
    assert target.read_text() == '{"old": true}\n' and [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_the_reserve_is_sized_by_ragmem_disk_reserve_and_a_bad_value_is_one_line(home, monkeypatch):
    from ragmem import exits
    from ragmem.errors import RagmemError

    monkeypatch.setenv("RAGMEM_DISK_RESERVE", "0")
    space.hold_reserve()
    assert not space.reserve_path().exists()  # none asked for
    monkeypatch.setenv("RAGMEM_DISK_RESERVE", "65536")
    space.hold_reserve()
    assert space.reserve_path().stat().st_size == 65536
    assert space.release_reserve() == 65536 and not space.reserve_path().exists()
    monkeypatch.setenv("RAGMEM_DISK_RESERVE", "8MB")
    with pytest.raises(RagmemError, match=r"^RAGMEM_DISK_RESERVE: expected a whole number \(bytes\), got '8MB'$"):
        exits.check_environment()
