"""The leases on the shared Prefect server and its idle stop (ragmem.orchestration.idle), in process:
a lease held keeps it up, the last one given back sets when it may stop, a killed command's lease
counts as given back, and a command that takes it at the last moment keeps it."""

from __future__ import annotations

import json
import os
import threading
import time

from ragmem.orchestration import idle
from ragmem.orchestration.server import process_identity


def test_a_lease_keeps_the_server_and_the_last_one_given_back_sets_its_idle_period(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    lease = idle.take(tmp_path, idle_s=60)
    held = idle.held(tmp_path)
    assert [h["pid"] for h in held] == [os.getpid()] and held[0]["home"] == str((tmp_path / "home").resolve())
    assert held[0]["idle_s"] == 60 and idle.idle_until(tmp_path) is None
    idle.give_back(lease)
    assert idle.held(tmp_path) == [] and 55 < idle.idle_until(tmp_path) - time.time() <= 60
    idle.give_back(idle.take(tmp_path, idle_s=None))  # null: until ragmem server stop
    assert idle.idle_until(tmp_path) == float("inf")


def test_a_killed_commands_lease_counts_as_given_back(tmp_path):
    """A lease whose process is gone: its number now names another process (a start time that is not
    the one recorded), as after a SIGKILL and a reused pid."""
    (tmp_path / "leases").mkdir()
    path = tmp_path / "leases" / f"{os.getpid()}.json"
    lease = {"pid": os.getpid(), "identity": process_identity(os.getpid()), "idle_s": 5, "home": "/h",
             "command": "ragmem run", "since": time.time()}
    path.write_text(json.dumps(lease))
    assert [h["pid"] for h in idle.held(tmp_path)] == [os.getpid()]
    path.write_text(json.dumps({**lease, "identity": "an earlier process"}))
    assert idle.held(tmp_path) == [] and not path.exists()  # given back when found gone
    assert 0 < idle.idle_until(tmp_path) - time.time() <= 5


def test_the_watcher_stops_the_server_once_idle_and_not_while_a_command_holds_it(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    stopped = threading.Event()
    lease = idle.take(tmp_path, idle_s=0.3)
    outcome = []
    watcher = threading.Thread(target=lambda: outcome.append(idle.watch(
        tmp_path, stop=lambda: stopped.set() or True, running=lambda: not stopped.is_set(), poll_s=0.05)))
    watcher.start()
    time.sleep(0.5)
    assert not stopped.is_set()  # held: kept however long
    idle.give_back(lease)
    given = time.monotonic()
    time.sleep(0.1)
    late = time.monotonic() - given >= 0.3  # (a busy machine held this thread past the idle period)
    assert not stopped.is_set() or late  # within its idle period
    watcher.join(timeout=30)
    assert stopped.is_set() and outcome == ["stopped the server: no command used it for 0.3 s"]
    # never used after its start (ragmem server start): its own idle period counts from the watcher's start
    stopped.clear()
    (tmp_path / "idle-until").unlink()
    began = time.monotonic()
    idle.watch(tmp_path, stop=lambda: stopped.set() or True, running=lambda: not stopped.is_set(), poll_s=0.05, default_idle_s=0.4)
    assert stopped.is_set() and time.monotonic() - began >= 0.4
    # a server stopped by hand: nothing left to watch
    assert idle.watch(tmp_path, stop=lambda: stopped.set() or True, running=lambda: False, poll_s=0.01) == "the server stopped"


def test_a_lease_whose_holder_runs_where_its_pid_cannot_be_seen_holds_by_its_lock(tmp_path, monkeypatch):
    """Another install in another pid namespace shares the folder: its pid means nothing here, but
    the lock on its lease file is the kernel's and holds until that command ends, however it ends."""
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    lease = idle.take(tmp_path, idle_s=5)
    monkeypatch.setattr(idle, "_identity", lambda pid: None)  # (its process not visible from here)
    assert [h["pid"] for h in idle.held(tmp_path)] == [os.getpid()] and lease.exists()
    idle._LOCKS.pop(lease).close()  # the holder ends without giving it back (SIGKILL): the kernel lets go
    assert idle.held(tmp_path) == [] and not lease.exists()
    assert 0 < idle.idle_until(tmp_path) - time.time() <= 5


def test_a_prefect_api_url_naming_the_shared_server_holds_it_too(tmp_path, monkeypatch):
    """A profile set by hand to the shared server's URL: the command still takes a lease, so that no
    idle watcher stops the server under it; another server's URL takes none."""
    from ragmem.orchestration import server

    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RAGMEM_SERVER_HOME", str(tmp_path / "server"))
    monkeypatch.setenv("RAGMEM_PREFECT_PORT", "4299")
    monkeypatch.setattr(server, "_ours", lambda port: port == 4299)
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4300/api")
    assert server.resolve_api_url() == "http://127.0.0.1:4300/api"
    assert idle.held(server.server_home()) == []
    monkeypatch.setenv("PREFECT_API_URL", "http://localhost:4299/api")
    assert server.resolve_api_url() == "http://localhost:4299/api"
    held = idle.held(server.server_home())
    assert [h["pid"] for h in held] == [os.getpid()]
    for path in list(idle._LOCKS):
        idle.give_back(path)
