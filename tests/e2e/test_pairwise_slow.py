"""``ragmem compare A B --judge pairwise`` against a slow judge (some replies after 5 s, the timeout 2 s),
as a real process: progress lines while it judges, Ctrl+C ends it with how much was kept and the
command to go on, the same command then asks only what was not answered, identical answers cost no
request, and the timed-out examples are recorded (the breaker stays closed: the server is slow, not down)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import ragmem
from tests.conftest import interrupted_when
from tests.openai_stub import Stub, data_block

pytestmark = pytest.mark.e2e

N, SAME = 24, 8  # the first SAME examples: the same answer in both runs
SLOW = {i for i in range(SAME, N) if i % 5 == 0}  # 10, 15, 20: their replies come after 5 s


def _records(voice: str, right: set[int]) -> list[dict]:
    return [{"id": f"e{i}", "query": f"Where is depot {i}?", "reference_answer": f"Depot {i} is in Porto.",
             "generated_answer": f"Depot {i} is in Porto." if i < SAME else
             f"{voice}Depot {i} is in Porto." if i in right else f"{voice}Depot {i} might be in Faro."} for i in range(N)]


def _number(request) -> int:
    return int(data_block(request, "question").split()[3].rstrip("?"))


def _judge(request):
    if _number(request) in SLOW:
        time.sleep(5)
    return {"winner": "2" if "I checked" in data_block(request, "answer_2") else "1", "reason": "the checked one"}


def _asked(request) -> tuple[int, bool]:
    """(example, whether B's answer came first): which of an example's two requests it is."""
    return _number(request), "I checked" in data_block(request, "answer_1")


def test_pairwise_on_a_slow_judge_shows_progress_resumes_and_asks_nothing_twice(tmp_path, shared_store):
    ids = []
    for name, voice, right in (("a", "", set(range(0, N, 2))), ("b", "I checked: ", set(range(N)))):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_records(voice, right)), encoding="utf-8")
        ids.append(ragmem.evaluate(str(path), experiment="pairwise-slow", tracking=shared_store).run_id)
    env = {**os.environ, "RAGMEM_PROGRESS": "log", "RAGMEM_PROGRESS_INTERVAL": "1"}
    with Stub(chat=_judge) as stub:
        command = [sys.executable, "-m", "ragmem.cli", "compare", *ids, "--judge", "pairwise",
                   "--tracking-uri", shared_store["uri"], "--set", "judge.type=llm", "--set", "judge.model=judge-test",
                   "--set", f"judge.base_url={stub.base_url}", "--set", f"judge.cache_dir={tmp_path / 'cache'}",
                   "--set", "judge.timeout_s=2", "--set", "judge.retry_backoff_s=0.01", "--set", "judge.max_concurrency=2"]
        first = interrupted_when(command, lambda: len(stub.requests) >= 12, "12 pairwise requests", env, tmp_path)
        err = first.stderr
        assert first.returncode == 130, err
        last = err.strip().splitlines()[-1]
        kept = int(last.split()[1])
        assert last.startswith(f"interrupted: {kept} of 32 pairwise requests answered and kept in the judge cache; "
                               f"run the same command to ask only the rest: ragmem compare {ids[0]} {ids[1]} --judge pairwise")
        assert "llm pairwise: " in err and "/32 (" in err  # progress lines while it judged
        answered = {_asked(r) for r in stub.requests[:]} - {(i, b) for i in SLOW for b in (False, True)}
        assert kept >= 1
        before = len(stub.requests)
        second = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert second.returncode == 0, second.stderr
        again = [_asked(r) for r in stub.requests[before:]]
    # only what had no reply was asked: every request of the rerun is one the first did not get
    # answered (the slow ones: twice each, the timeout retried once), none of an identical pair
    assert all(i >= SAME for i, _ in [_asked(r) for r in stub.requests]) and len(stub.requests) >= before
    assert len(set(again)) == 32 - kept and {(i, b) for i in SLOW for b in (False, True)} <= set(again)
    assert answered - set(again) and kept <= len(answered)
    slow_again = [a for a in again if a[0] in SLOW]
    assert len(slow_again) == 2 * len(set(slow_again))  # each slow request: asked, timed out, asked once more
    out = " ".join(second.stdout.split())
    assert f"judge requests {len(again)}, cached {kept}, failed examples 3" in out
    assert "B wins 13, ties 8, loses 0" in out and "8 of the ties: identical answers, not sent to the judge" in out
    assert "warning: 3 examples not judged: timed out" in second.stderr
    assert "note: the same command asks only the 3 examples not judged again (the other replies are cached); " \
           "a slow server: raise judge.timeout_s" in second.stderr
