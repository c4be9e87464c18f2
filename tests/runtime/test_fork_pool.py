"""The fork pool (ragmem.runtime.parallel.ForkPool, ragmem.runtime.forking): parts of a map on processes forked
from this one.

Its results are the serial map's, in order; at most ``workers - 1`` children run at a time; a
child's exception is raised here, a child that dies is named, and where a thread other than
ragmem's own runs, the map goes to loky's pool instead of forking.
"""

import os
import signal
import sys
import threading

import pytest

from ragmem.runtime import forking, parallel
from ragmem.runtime.parallel import ForkPool, SERIAL

pytestmark = pytest.mark.skipif(not (hasattr(os, "fork") and sys.platform.startswith("linux")), reason="forking: Linux only")


def _where(items, offset):
    """Each item with the process that mapped it and the children running when that process forked."""
    return [(item + offset, os.getpid(), len(forking._RUNNING)) for item in items]


def _fails_on(items, bad):
    if bad in items:
        raise ValueError(f"item {bad} is bad")
    return list(items)


def _dies_on(items, bad):
    if os.getpid() != _PARENT:  # every child dies (the OOM killer's SIGKILL, say)
        os.kill(os.getpid(), signal.SIGKILL)
    return list(items)


def _sizes(items):
    """Each item with the size of the part it came in."""
    return [(item, len(items)) for item in items]


def _sizes_in_threes(items):
    return _sizes(items)


_sizes_in_threes.part_items = 3  # type: ignore[attr-defined]


FORK_IS_SAFE = forking.fork_is_safe


@pytest.fixture
def small_parts(monkeypatch, tmp_path):
    """Parts of 7 items from 10 on; forking whatever threads other tests of this process left (the
    check itself is tested on its own, below: these children run only the functions above)."""
    monkeypatch.setattr(forking, "fork_is_safe", lambda: True)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_ITEMS", 10)
    monkeypatch.setattr(ForkPool, "PART", 7)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # the children's result files
    yield tmp_path
    parallel.stop_pool()


@pytest.mark.parametrize("workers", [2, 3])
def test_a_forked_map_equals_the_serial_map_in_order_and_leaves_no_file(small_parts, workers):
    items = list(range(100))
    mapped = ForkPool(workers).map(_where, items, 1000)
    assert [m[0] for m in mapped] == [x for x, _, _ in SERIAL.map(_where, items, 1000)]
    pids = {pid for _, pid, _ in mapped}
    assert os.getpid() in pids and len(pids) > 1  # this process and children took parts
    children_running_at_fork = [running for _, pid, running in mapped if pid != os.getpid()]
    assert max(children_running_at_fork) <= workers - 2  # never more than workers - 1 children at once
    assert list(small_parts.iterdir()) == [] and forking._RESULTS == {} and forking._RUNNING == set()


def test_a_function_slower_per_item_is_mapped_in_the_smaller_parts_it_names(small_parts):
    """A child's private memory grows with how long it runs (the pages this process writes meanwhile
    are copied): a mapped function that names ``part_items`` (generation scores: 250) is cut in parts
    of at most that many, the others in parts of ``ForkPool.PART`` (7 here)."""
    mapped = ForkPool(2).map(_sizes_in_threes, list(range(20)))
    assert [item for item, _ in mapped] == list(range(20)) and {size for _, size in mapped} <= {1, 2, 3}
    assert {size for _, size in ForkPool(2).map(_sizes, list(range(20)))} == {6, 7}


def test_maps_begun_together_are_each_collected_whole(small_parts):
    pool = ForkPool(2)
    first, second = pool.submit(_where, list(range(50)), 0), pool.submit(_where, list(range(40)), 500)
    assert [m[0] for m in second.result()] == list(range(500, 540))
    assert [m[0] for m in first.result()] == list(range(50))


def test_a_childs_exception_is_raised_here(small_parts):
    with pytest.raises(ValueError, match="item 90 is bad"):
        ForkPool(2).map(_fails_on, list(range(100)), 90)
    assert list(small_parts.iterdir()) == []


def test_a_child_that_dies_is_named_not_taken_for_an_empty_result(small_parts):
    with pytest.raises(RuntimeError, match=r"scoring worker \(process \d+\) ended without its results"):
        ForkPool(2).map(_dies_on, list(range(100)), None)
    assert list(small_parts.iterdir()) == [] and forking._RUNNING == set()


def test_with_another_libraries_thread_running_the_map_goes_to_lokys_pool(small_parts, monkeypatch):
    monkeypatch.setattr(forking, "fork_is_safe", FORK_IS_SAFE)
    monkeypatch.setattr(threading, "enumerate", lambda: [threading.current_thread(), *started])
    sent, started = [], []
    monkeypatch.setattr(parallel.ProcessPool, "submit",
                        lambda self, fn, items, *args: sent.append(len(items)) or parallel.Pending(lambda: fn(items, *args)))
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, name="a-library-thread", daemon=True)
    other.start()
    started.append(other)
    try:
        assert not forking.fork_is_safe()
        assert [m[1] for m in ForkPool(2).map(_where, list(range(30)), 0)] == [os.getpid()] * 30
        assert sent == [30]
    finally:
        stop.set()
        other.join()
    ours = threading.Thread(target=stop.wait, name="ragmem-progress-test", daemon=True)  # ragmem's own: forked
    stop.clear()
    ours.start()
    started[:] = [ours]
    try:
        assert forking.fork_is_safe()
    finally:
        stop.set()
        ours.join()


def test_stop_pool_kills_the_children_and_removes_their_files(small_parts):
    pending = ForkPool(2).submit(_blocks, list(range(30)))
    assert forking._RUNNING and list(small_parts.iterdir())
    parallel.stop_pool()
    assert forking._RUNNING == set() and forking._RESULTS == {} and list(small_parts.iterdir()) == []
    del pending


def _blocks(items):
    if os.getpid() != _PARENT:
        signal.pause()  # until killed
    return list(items)


_PARENT = os.getpid()


def test_a_tick_hands_the_next_parts_to_the_children_whose_slots_freed_up(small_parts):
    import time

    pool = ForkPool(2)
    pending = pool.submit(_where, list(range(35)), 0)  # five parts of 7: part 1 forked at once
    begun = pool._begun[0]
    assert list(begun.children) == [1] and begun.todo == [2, 3, 4]
    for handed in ([1, 2], [1, 2, 3]):
        deadline = time.monotonic() + 60
        while forking.running() and time.monotonic() < deadline:  # the child ends (a busy machine: slowly)
            time.sleep(0.01)
        pool.tick()
        assert list(begun.children) == handed
    mapped = pending.result()
    assert [m[0] for m in mapped] == list(range(35)) and pool._begun == []
    assert {pid for _, pid, _ in mapped[7:21]} != {os.getpid()}  # parts 1-2 were the children's


def test_children_reaped_elsewhere_still_give_their_results(small_parts):
    """With SIGCHLD ignored the kernel reaps the children itself: waiting for one fails, its result
    file is what counts."""
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        assert [m[0] for m in ForkPool(2).map(_where, list(range(40)), 0)] == list(range(40))
    finally:
        signal.signal(signal.SIGCHLD, previous)
    assert forking._RUNNING == set() and list(small_parts.iterdir()) == []


def test_once_another_thread_runs_no_part_is_forked_any_more_and_this_process_takes_them(small_parts, monkeypatch):
    safe = [True]
    monkeypatch.setattr(forking, "fork_is_safe", lambda: safe[0])
    pool = ForkPool(2)
    pending = pool.submit(_where, list(range(35)), 0)  # part 1 forked while it was safe
    assert list(pool._begun[0].children) == [1]
    safe[0] = False  # an LLM client's thread pool, say, started since
    pool.tick()
    mapped = pending.result()
    assert [m[0] for m in mapped] == list(range(35))
    assert {pid for _, pid, _ in mapped[14:]} == {os.getpid()}  # parts 2-4: this process's
