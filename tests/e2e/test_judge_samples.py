"""Repeated judging (``judge.samples``) at scale: 2 x 2,000 requests to a local scripted endpoint whose
verdict flips with a known probability; the flip rate measured, nothing sent twice, the interval
widened by the noise. The rest of ``judge.samples``, in process: tests/judges/test_judge_samples.py."""

from __future__ import annotations

import pytest

import ragmem
from tests.judges.test_judge_samples import N_ITEMS, SAMPLES, _data, _noisy, _settings
from tests.openai_stub import Stub

pytestmark = pytest.mark.e2e


def _expected_flip_rate(q: float, m: int = SAMPLES) -> float:
    """Each sample is the truth with probability 1 - q/2: the samples disagree unless all m are the
    truth or all m are not."""
    right = 1 - q / 2
    return 1 - right ** m - (1 - right) ** m


@pytest.mark.e2e  # 2 x 2,000 requests to a local server
def test_samples_measure_the_judges_noise_cost_nothing_twice_and_widen_the_interval(tmp_path):
    data = _data(tmp_path)
    widths = {}
    for q in (0.0, 0.4):  # (no noise: every measure exact; 0.4: the flip rate against its formula, the wider interval)
        folder = tmp_path / f"q{q}"
        folder.mkdir()
        with Stub(chat=_noisy(q)) as stub:
            first = ragmem.evaluate(data, track=False, judge=_settings(stub, folder), metrics=["answer_correctness"])
            sent = len(stub.requests)
            if q == 0.4:  # the rerun (once: it is the same at every q): every sample from the cache
                again = ragmem.evaluate(data, track=False, judge=_settings(stub, folder), metrics=["answer_correctness"])
                assert len(stub.requests) == sent and again.metrics["judge_calls"] == 0
                assert again.metrics["pass_rate"] == first.metrics["pass_rate"]
                assert again.metrics["judge_flip_rate"] == first.metrics["judge_flip_rate"]
        m = first.metrics
        assert sent == SAMPLES * N_ITEMS and m["judge_calls"] == SAMPLES * N_ITEMS
        assert m["judge_flip_rate"] == pytest.approx(_expected_flip_rate(q), abs=0.05), (q, m["judge_flip_rate"])
        assert set(first.table["judge_votes"].dropna()) == {SAMPLES}  # odd: no tie, nothing undecided
        assert m["n_judge_undecided"] == 0 and first.summary["ci"]["judge_flip_rate"] is not None
        low, high = first.summary["ci"]["pass_rate"]
        widths[q] = high - low
        print(f"q={q}: judge_flip_rate {m['judge_flip_rate']:.4f} (expected {_expected_flip_rate(q):.4f}), "
              f"self-agreement {m['judge_self_agreement']:.4f}, fleiss {m['judge_fleiss_kappa']:.4f}, "
              f"pass_rate {m['pass_rate']:.4f} [{low:.4f}, {high:.4f}]")
        if q == 0.0:
            assert m["judge_flip_rate"] == 0.0 and m["judge_self_agreement"] == 1.0 and m["judge_fleiss_kappa"] == 1.0
    assert widths[0.4] > widths[0.0]
