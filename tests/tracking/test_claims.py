"""A claim in the tracking store (:mod:`ragmem.tracking.claims`): of claimers at the same instant
exactly one holds it; a released claim or one whose process is gone is taken again (the generation
grows); a holder on another host holds; and a window's run claims its config's stream of windows
(:mod:`ragmem.run.windows`), a second run refused with one line naming the holder."""

from __future__ import annotations

import itertools
import os
import threading
import uuid

import pytest

from ragmem.config.loading import RunConfig
from ragmem.run import windows
from ragmem.runtime.processes import host
from ragmem.tracking.claims import PID, PREFIX, RUN
from ragmem.tracking.store import Tracker

_names = (f"test-{uuid.uuid4().hex[:8]}-{i}" for i in itertools.count())


@pytest.fixture
def tracker(shared_store):
    return Tracker(shared_store["uri"], shared_store["artifact_root"])


def test_of_eight_claimers_at_the_same_instant_exactly_one_holds(tracker):
    name, start = next(_names), threading.Barrier(8)
    outcomes: list = [None] * 8
    claims = [tracker.claim(name) for _ in range(8)]

    def take(i):
        start.wait()
        outcomes[i] = claims[i].take()

    threads = [threading.Thread(target=take, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    winners = [i for i, o in enumerate(outcomes) if o is None]
    assert len(winners) == 1, outcomes
    held = claims[winners[0]].held
    assert all(o.generation == held.generation and o.experiment_id == held.experiment_id
               for o in outcomes if o is not None)  # each loser names the winner's claim
    assert f"pid {os.getpid()} on host {host()} since " in outcomes[(winners[0] + 1) % 8].said()


def test_a_released_claim_is_taken_again_and_the_run_is_named(tracker):
    name = next(_names)
    first, second = tracker.claim(name), tracker.claim(name)
    assert first.take() is None
    first.note_run("run-1234")
    holder = second.take()
    assert holder is not None and holder.tags[RUN] == "run-1234" and holder.said().endswith("(run run-1234)")
    first.release()
    assert second.take() is None and second.held.generation == last_generation(tracker, name) == 1
    released = tracker.client.get_experiment_by_name(f"{PREFIX}/{name}/0")
    assert released.lifecycle_stage == "deleted" and "ragmem.claim.released" in released.tags  # hidden from the UI


def last_generation(tracker, name) -> int:
    return max(int(e.name.rsplit("/", 1)[1]) for e in tracker.client.search_experiments(
        view_type=3, filter_string=f"name LIKE '{PREFIX}/{name}/%'"))


def test_a_claim_whose_process_is_gone_is_taken_over_and_one_on_another_host_holds(tracker):
    name = next(_names)
    gone = 4_194_000 + os.getpid() % 100  # (above any pid this machine hands out: no such process)
    tracker.client.create_experiment(f"{PREFIX}/{name}/0", tags={"ragmem.host": host(), PID: str(gone)})
    claim = tracker.claim(name)
    assert claim.take() is None and claim.held.generation == 1
    claim.release()
    tracker.client.create_experiment(f"{PREFIX}/{name}/2", tags={"ragmem.host": "elsewhere", PID: "12"})
    holder = tracker.claim(name).take()
    assert holder is not None and holder.said().startswith("pid 12 on host elsewhere")


def _traces_config(shared_store, experiment: str) -> RunConfig:
    return RunConfig.from_dict({"experiment": experiment, "tracking": dict(shared_store),
                                "data": {"traces": {"experiment": "app", "tracking_uri": shared_store["uri"],
                                                    "incremental": True}}})


def test_a_second_window_of_the_same_config_is_refused_naming_the_holder_until_released(shared_store):
    cfg = _traces_config(shared_store, f"claims-{uuid.uuid4().hex[:8]}")
    windows.claim(cfg)
    try:
        windows.holds(cfg, "run-abcd")
        key = windows.key(cfg)
        held = windows._HELD.pop(key)  # (as another process would see it: this one no longer holds it)
        try:
            with pytest.raises(windows.WindowHeld, match=r"^data.traces.incremental: the windows of this config are "
                                                         rf"held by pid {os.getpid()} on host .* \(run run-abcd\); a "
                                                         r"window starts when that run has ended$"):
                windows.claim(cfg)
        finally:
            windows._HELD[key] = held
    finally:
        windows.release(cfg)
    windows.claim(cfg)  # released: taken again
    windows.release(cfg)
    assert windows._HELD == {}


def test_a_run_without_incremental_windows_claims_nothing(shared_store):
    cfg = RunConfig.from_dict({"tracking": dict(shared_store),
                               "data": {"traces": {"experiment": "app", "tracking_uri": shared_store["uri"]}}})
    windows.claim(cfg)
    assert windows._HELD == {}


def test_a_window_that_cannot_be_read_gives_its_claim_back_and_a_check_takes_none(shared_store, monkeypatch):
    from ragmem.errors import ConfigError
    from ragmem.run import prepare

    cfg = _traces_config(shared_store, f"claims-{uuid.uuid4().hex[:8]}")
    seen, original = [], windows.claim
    monkeypatch.setattr(windows, "claim", lambda c, wait_s=0.0: (seen.append(windows.key(c)), original(c, wait_s))[1])
    for claim in (True, False):  # (the experiment 'app' is not in the store: the window cannot be read)
        with pytest.raises(ConfigError, match="data.traces.experiment: no experiment 'app'"):
            prepare.for_run(cfg, claim=claim)
        assert windows._HELD == {}
    assert seen == [windows.key(cfg)]  # claimed by the run, given back when it failed; the check took none


def test_a_window_ends_its_lag_before_the_run_starts():
    from datetime import datetime, timezone

    from ragmem.config.trace_settings import TracesSettings
    from ragmem.errors import ConfigError
    from ragmem.run.traffic import window

    now = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)
    windows_ = TracesSettings(experiment="app", incremental=True)
    assert window(windows_, now=now)[1] == datetime(2026, 12, 6, 11, 58, tzinfo=timezone.utc)  # (its lag: 2m)
    assert window(windows_.model_copy(update={"lag": "0s"}), now=now)[1] == now
    assert window(TracesSettings(experiment="app"), now=now)[1] == now  # (a run by hand: up to its start)
    assert window(TracesSettings(experiment="app", until="1h"), now=now)[1] == datetime(2026, 12, 6, 11, 0,
                                                                                        tzinfo=timezone.utc)
    assert window(TracesSettings(files=["a.json"]), now=now, timed=False)[1] is None  # (files: what they hold)
    with pytest.raises(ConfigError, match=r"data.traces.lag.*expected a duration \(2m, 30s, 0s\), got 'soon'"):
        RunConfig.from_dict({"data": {"traces": {"experiment": "app", "lag": "soon"}}})


def test_a_scheduled_window_waits_for_the_holder_and_takes_the_windows_once_it_ends(shared_store, monkeypatch, caplog):
    """Issue 60, point 1: a window of ``ragmem serve`` that finds its config's windows held waits for
    the holder (saying so), and holds them as soon as it has ended; a wait that runs out is refused."""
    import logging
    import time

    monkeypatch.setattr(windows, "WAIT_POLL_S", 0.05)
    cfg = _traces_config(shared_store, f"claims-{uuid.uuid4().hex[:8]}")
    other = Tracker(shared_store["uri"], shared_store["artifact_root"]).claim(windows.key(cfg))
    assert other.take() is None  # (another run holds them)
    with pytest.raises(windows.WindowHeld, match=r"\(waited 0.2 s\); a window starts when that run has ended$"):
        windows.claim(cfg, wait_s=0.2)
    threading.Timer(0.5, other.release).start()
    began = time.monotonic()
    with caplog.at_level(logging.INFO, logger="ragmem"):
        windows.claim(cfg, wait_s=60)
    try:
        assert 0.4 < time.monotonic() - began < 30 and windows.key(cfg) in windows._HELD
        assert any("held by pid" in r.getMessage() and "waiting for it to end" in r.getMessage() for r in caplog.records)
    finally:
        windows.release(cfg)
    assert windows._HELD == {}
