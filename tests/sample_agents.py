"""Agents used by the tests (imported as ``tests.sample_agents:...``)."""

import random
import time


def echo(query):
    return {"answer": query, "contexts": [{"text": query, "id": "c1", "source": "rag"}],
            "timings": {"retrieve": 0.001, "llm": 0.002}}


def with_history(query, session_id=None, history=None):
    return f"{session_id}:{len(history or [])}:{query}"


def sometimes_fails(query):
    if "fail" in query:
        raise RuntimeError("backend unavailable")
    if "slow" in query:
        time.sleep(3.0)
    if "bad" in query:
        return {"answer": 42}
    return query, ["ctx " + query]


def jittery(query):
    time.sleep(random.uniform(0, 0.02))
    return query


class Counter:
    def __init__(self, prefix="n"):
        self.prefix, self.calls = prefix, 0

    def __call__(self, query):
        self.calls += 1
        return f"{self.prefix}{self.calls}"


class Breaks:
    """A class target whose constructor fails when ``broken`` (a child of a sweep that fails at run time)."""

    def __init__(self, broken=False):
        if broken:
            raise RuntimeError("backend refused the connection")

    def __call__(self, query):
        return query


CALLS: list[str] = []  # every construction and call of Recorded (tests count them)


class Recorded:
    """An agent that records that it was built and called (to show nothing ran before an error)."""

    def __init__(self):
        CALLS.append("built")

    def __call__(self, query):
        CALLS.append(query)
        return query


class Keyed:
    """A class target that takes a key in its params (which must never be logged)."""

    def __init__(self, api_key=None, options=None):
        self.api_key = api_key

    def __call__(self, query):
        return query


class KeyRequired:
    """A class target that refuses to be built without the key the test expects (proves a masked
    setting is restored before the agent is built)."""

    def __init__(self, api_key=None, options=None):
        import os

        if api_key != os.environ.get("RAGMEM_TEST_EXPECTED_KEY"):
            raise ValueError("wrong api_key")
        if (options or {}).get("accessToken") != os.environ.get("RAGMEM_TEST_EXPECTED_KEY"):
            raise ValueError("wrong accessToken")

    def __call__(self, query):
        return query


def slow_logged(query):
    """Sleeps ``RAGMEM_TEST_DELAY`` seconds (default 0.05) and appends the query to the file named by
    ``RAGMEM_TEST_CALLS``: a cross-process count of agent calls (interrupt and resume tests)."""
    import os

    with open(os.environ["RAGMEM_TEST_CALLS"], "a", encoding="utf-8") as calls:
        calls.write(query + "\n")
        made = calls.tell()
    at = os.environ.get("RAGMEM_TEST_INTERRUPT_AT_BYTES")  # in-process tests: Ctrl+C after that much
    if at and made >= int(at) and not os.environ.get("RAGMEM_TEST_INTERRUPTED"):
        import signal

        os.environ["RAGMEM_TEST_INTERRUPTED"] = "1"
        os.kill(os.getpid(), signal.SIGINT)  # a real signal: it wakes the main thread's wait
    time.sleep(float(os.environ.get("RAGMEM_TEST_DELAY", "0.05")))
    if query == "hang":
        time.sleep(10_000)
    return {"answer": query, "contexts": [query]}


QUALITY_CALLS: list[str] = []  # every call of Quality (a judge sweep counts them)


class Quality:
    """An agent whose answers are marked GOOD or BAD (``good``): two scripted judges that like
    opposite marks rank its two configurations in opposite orders."""

    def __init__(self, good=True):
        self.mark = "GOOD" if good else "BAD"

    def __call__(self, query):
        QUALITY_CALLS.append(query)
        return f"{self.mark} answer to {query}"


class StopsAfter:
    """An agent that asks the run to stop, as Ctrl+C does, at its ``after``-th call (counted over
    every instance: a resumed run builds a new one, and is not stopped again)."""

    calls = 0

    def __init__(self, after=25):
        self.after = after

    def __call__(self, query):
        from ragmem.runtime import interrupts

        type(self).calls += 1
        if type(self).calls == self.after:
            interrupts.STOP.set()
        return f"answer to {query}"


def always_fails(query):
    """Every call raises: a run with nothing answered."""
    raise RuntimeError("backend unavailable")


def half_pairs(query):
    """Replies a file cannot hold: a lone surrogate (half of a UTF-16 pair, as a JSON ``\\udXXX``
    escape decodes) in the answer, a context or a stage's name, or in the message it raises."""
    if "raise" in query:
        raise RuntimeError("upstream said \udc9f")
    if "context" in query:
        return {"answer": "fine", "contexts": [{"text": "half \ud83d of an emoji", "id": "c1"}]}
    if "stage" in query:
        return {"answer": "fine", "timings": {"retri\udfffeve": 0.1}}
    if "ok" in query:
        return {"answer": "fine 检索", "contexts": [{"text": "whole 😀", "id": "c1"}]}
    return "the answer \ud800"
