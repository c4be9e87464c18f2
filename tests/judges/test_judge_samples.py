"""Repeated judging (``judge.samples``) against a local scripted endpoint whose verdict is noisy with
a known probability: the flip rate it measures, the requests it sends (and does not send again), the
interval that widens with the noise, ties left undecided, and the dry run's count. At scale (2 x 2,000
requests): tests/e2e/test_judge_samples.py."""

from __future__ import annotations

import hashlib
import json

import pytest

import ragmem
from tests.openai_stub import Stub, data_block

N_ITEMS = 400
SAMPLES = 5


def _data(tmp_path, n=N_ITEMS):
    records = [{"id": f"q{i}", "query": f"question {i}", "reference_answer": f"reference {i}",
                "generated_answer": f"{'good' if i % 3 else 'bad'} answer {i}"} for i in range(n)]
    path = tmp_path / "data.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    return str(path)


def _noisy(q: float):
    """A judge that says the truth ('good' answers are correct), except that with probability q it
    answers at random (yes or no, even odds): decided by a hash of the answer and the request's
    seed, so each sample of an item is its own draw and a rerun is the same."""
    def chat(request):
        answer = data_block(request, "answer")
        digest = hashlib.sha256(f"{answer}|{request.get('seed')}|{q}".encode()).digest()
        u, coin = int.from_bytes(digest[:8], "big") / 2 ** 64, digest[8] & 1
        truth = answer.startswith("good")
        verdict = bool(coin) if u < q else truth
        return {"verdict": "yes" if verdict else "no", "reason": "scripted"}
    return chat


def _settings(stub, tmp_path, **extra):
    return {"type": "llm", "model": "noisy", "base_url": stub.base_url, "cache_dir": str(tmp_path / "cache"),
            "retry_backoff_s": 0.01, "timeout_s": 10, "temperature": 1.0, "samples": SAMPLES,
            "max_concurrency": 16, **extra}


def test_a_tie_is_undecided_never_a_pass_or_a_fail(tmp_path):
    """Two samples that always disagree (the seed decides): every item is undecided, counted, and
    pass_rate is null, not 0 or 1."""
    def split(request):
        return {"verdict": "yes" if request.get("seed", 0) % 2 == 0 else "no", "reason": "by seed"}

    data = _data(tmp_path, n=6)
    with Stub(chat=split) as stub:
        result = ragmem.evaluate(data, track=False, judge=_settings(stub, tmp_path, samples=2),
                                 metrics=["answer_correctness"])
    assert result.metrics["pass_rate"] is None and result.metrics["n_judge_undecided"] == 6
    assert result.metrics["judge_flip_rate"] == 1.0 and result.metrics["judge_self_agreement"] == 0.5
    assert result.table["judge_error"].str.startswith("undecided: 1 of 2 valid samples said yes").all()


def test_samples_at_temperature_zero_are_allowed_and_said_once(tmp_path):
    data = _data(tmp_path, n=4)
    with Stub(chat=_noisy(0.0)) as stub:
        result = ragmem.evaluate(data, track=False, judge=_settings(stub, tmp_path, samples=3, temperature=0.0),
                                 metrics=["answer_correctness"])
    said = [n for n in result.summary["notes"] if "may be identical" in n]
    assert len(said) == 1 and said[0].startswith("judge.samples 3 with judge.temperature 0")


def test_the_dry_run_counts_every_sample_and_a_higher_n_pays_only_for_the_new_ones(tmp_path):
    data = _data(tmp_path, n=10)
    with Stub(chat=_noisy(0.2)) as stub:
        plan = ragmem.dry_run(data, judge=_settings(stub, tmp_path, samples=3), metrics=["answer_correctness"])
        assert stub.requests == []
        ragmem.evaluate(data, track=False, judge=_settings(stub, tmp_path, samples=3), metrics=["answer_correctness"])
        assert len(stub.requests) == 30
        raised = ragmem.dry_run(data, judge=_settings(stub, tmp_path, samples=5), metrics=["answer_correctness"])
        ragmem.evaluate(data, track=False, judge=_settings(stub, tmp_path, samples=5), metrics=["answer_correctness"])
        assert len(stub.requests) == 30 + 20  # samples 3 and 4 only
    line = next(x for x in plan.lines if x.metric == "answer_correctness")
    assert line.requests == 30 and line.cached == 0
    raised_line = next(x for x in raised.lines if x.metric == "answer_correctness")
    assert raised_line.requests == 50 and raised_line.cached == 30


def test_samples_need_the_llm_judge(tmp_path):
    from ragmem.errors import ConfigError

    with pytest.raises(ConfigError, match="judge.samples: 3 needs judge.type llm"):
        ragmem.evaluate(_data(tmp_path, n=2), track=False, judge={"samples": 3})


def test_the_second_stage_of_items_draws_each_items_majority_with_its_exact_odds():
    """One example of three judged items, each asked 5 times ([yes, samples]); its copies drawn
    20,000 times: the mean value is the exact expectation over the items' majority outcomes
    (contextual precision enumerated over the 8 of them; faithfulness: the mean of the odds)."""
    import itertools

    import numpy as np
    import pandas as pd

    from ragmem.metrics.estimators import majority_odds
    from ragmem.metrics.rag import contextual_precision
    from ragmem.metrics.reliability import items_aggregator

    votes = [[3, 5], [1, 5], [4, 5]]
    q, _ = majority_odds(np.array([3, 1, 4]), np.array([5, 5, 5]))
    exact = {"mean": float(np.mean(q)),
             "precision": sum(np.prod([q[k] if o else 1 - q[k] for k, o in enumerate(outcome)]) * contextual_precision(list(outcome))
                              for outcome in itertools.product((0, 1), repeat=3))}
    for kind, observed in (("precision", contextual_precision([1, 0, 1])), ("mean", 2 / 3)):
        agg = items_aggregator(pd.Series([observed]), pd.Series([True]), pd.Series([votes]), kind)
        sums = agg.resum(np.random.default_rng(5), np.ones((20_000, 1)))
        assert (sums[:, 1] == 1).all()  # odd samples: never a tie
        assert sums[:, 0].mean() == pytest.approx(exact[kind], abs=0.01), kind
    fixed = items_aggregator(pd.Series([0.5, 1.0]), pd.Series([True, True]), pd.Series([[[1, 1], [0, 1]], None]), "mean")
    assert fixed.resum is None  # nothing asked twice: the one-stage bootstrap


def test_noisy_items_widen_the_interval_of_contextual_precision():
    import numpy as np
    import pandas as pd

    from ragmem.stats import intervals as stats
    from ragmem.metrics.base import mean_aggregator
    from ragmem.metrics.rag import contextual_precision
    from ragmem.metrics.reliability import items_aggregator

    rng = np.random.default_rng(9)
    verdicts = [list(rng.integers(0, 2, 4)) for _ in range(300)]
    values = pd.Series([contextual_precision(v) for v in verdicts])
    ok = pd.Series(True, index=values.index)
    sure = pd.Series([[[5 * x, 5] for x in v] for v in verdicts])            # every sample agreed
    noisy = pd.Series([[[3 if x else 2, 5] for x in v] for v in verdicts])    # 3-2 splits
    widths = {}
    for name, agg in (("one-stage", mean_aggregator(values, ok)), ("sure", items_aggregator(values, ok, sure, "precision")),
                      ("noisy", items_aggregator(values, ok, noisy, "precision"))):
        low, high = stats.bootstrap({"m": agg}, len(values), 1000, seed=1)["m"]
        widths[name] = high - low
    assert widths["sure"] == pytest.approx(widths["one-stage"], rel=0.1)
    assert widths["noisy"] > 1.15 * widths["one-stage"], widths  # 3-2 splits: 0.0729 against 0.0589
