"""Plug-in code called so that it cannot end, fake or block the run (:mod:`ragmem.runtime.contained`):
``sys.exit``, ``os._exit``, a hang and an exception are each that call's failure with its reason; the
real ``os._exit`` is untouched for every other thread; and a metric of one's own doing each of them
fails its examples while the run goes on to its summary."""

from __future__ import annotations

import os
import sys
import threading
import time

import ragmem
from ragmem.runtime.contained import Contained


def _exits(code):
    sys.exit(code)


def _hard_exit(code):
    os._exit(code)


def _hangs(seconds):
    time.sleep(seconds)
    return 1.0


def _raises(x):
    raise ValueError(f"bad {x}")


def test_each_way_out_is_that_calls_failure_and_the_next_call_works():
    call = Contained("test", timeout_s=0.5)
    assert call(_exits, {"code": 3}) == (None, "called sys.exit(3)")
    assert call(_hard_exit, {"code": 0}) == (None, "called os._exit(0)")
    assert call(_raises, {"x": 7}) == (None, "ValueError: bad 7")
    start = time.perf_counter()
    assert call(_hangs, {"seconds": 30}) == (None, "did not return within 0.5 s (abandoned)")
    assert time.perf_counter() - start < 5
    assert call(lambda: 2.5, {}) == (2.5, None)  # a new worker after the abandoned one
    call.close()


def test_os_exit_is_intercepted_only_on_a_plug_in_worker_thread(monkeypatch):
    import ragmem.runtime.contained as contained

    exits = []
    monkeypatch.setattr(contained, "_real_exit", exits.append)  # (the real one would end the test process)
    call = Contained("test")
    assert call(_hard_exit, {"code": 4}) == (None, "called os._exit(4)") and exits == []
    thread = threading.Thread(target=os._exit, args=(5,))  # any other thread: through to the real exit
    thread.start()
    thread.join()
    os._exit(6)  # the main thread too
    assert exits == [5, 6]
    call.close()


def test_a_metric_of_ones_own_that_exits_or_hangs_fails_its_examples_and_the_run_goes_on(tmp_path):
    def exits_softly(answer):
        if "3" in answer:
            sys.exit(3)
        return 1.0

    def exits_hard(answer):
        if "1" in answer:
            os._exit(0)
        return 0.5

    rows = [{"id": f"q{i}", "query": f"question {i}?", "generated_answer": f"answer {i}"} for i in range(5)]
    result = ragmem.evaluate(rows, track=False, metrics={"custom": [exits_softly, exits_hard]})
    table = result.table.set_index("id")
    assert table.loc["q3", "exits_softly_error"] == "called sys.exit(3)"
    assert table.loc["q1", "exits_hard_error"] == "called os._exit(0)"
    assert result.metrics["exits_softly"] == 1.0 and result.metrics["exits_softly_failures"] == 1
    assert result.metrics["exits_hard"] == 0.5 and result.metrics["exits_hard_failures"] == 1


def test_a_python_agent_that_exits_fails_that_example_and_the_run_goes_on():
    """os._exit(0) in a Python agent had ended the process with exit 0 and no output (a faked success)."""
    calls = []

    def agent(query):
        calls.append(query)
        if query.endswith("3"):
            sys.exit(3)
        if query.endswith("5"):
            os._exit(0)
        return "fine"

    rows = [{"id": f"q{i}", "query": f"question {i}", "reference_answer": "fine"} for i in range(8)]
    result = ragmem.evaluate(rows, track=False, agent=agent, metrics=["pass_rate"])
    errors = result.table.set_index("id")["error"]
    assert errors["q3"] == "PluginExit: called sys.exit(3)" and errors["q5"] == "PluginExit: called os._exit(0)"
    assert result.summary["counts"]["n_agent_errors"] == 2 and result.metrics["pass_rate"] == 1.0
    assert calls.count("question 3") == 1  # (an exit is not retried)
