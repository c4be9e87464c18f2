"""Anytime-valid confidence sequences (:mod:`ragmem.stats.sequential`) against a simulation with a
known truth: each sequence holds the truth at every batch at once in at least 95% of the runs (the
full 1,000 sequences: ``benchmarks/bench_sequential.py``), where a fixed-sample interval read after
every batch does not; the mean and the paired difference; decisions; constant memory."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragmem.stats.sequential import ConfidenceSequence, PairedSequence

SEQUENCES, STEPS, BATCH = 200, 300, 10


def _held(make, draw, truth, seed=0, sequences=SEQUENCES) -> float:
    """The share of ``sequences`` whose interval held ``truth`` after every batch."""
    rng = np.random.default_rng(seed)
    held = 0
    for _ in range(sequences):
        cs, values = make(), draw(rng)
        ok = True
        for start in range(0, len(values[0]), BATCH):
            cs.feed(*(v[start:start + BATCH] for v in values))
            low, high = cs.interval()
            ok = ok and low <= truth <= high
        held += ok
    return held / sequences


class _Mean(ConfidenceSequence):
    def feed(self, x):
        self.update(x.tolist())


class _Paired(PairedSequence):
    def feed(self, a, b):
        self.update_pairs(a.tolist(), b.tolist())


CASES = [  # (name, draw, truth)
    ("bernoulli 0.3", lambda r: ((r.random(STEPS) < 0.3).astype(float),), 0.3),
    ("beta(2, 5)", lambda r: (r.beta(2, 5, STEPS),), 2 / 7),
    ("rare passes 0.03", lambda r: ((r.random(STEPS) < 0.03).astype(float),), 0.03),
]


@pytest.mark.parametrize("name, draw, truth", CASES, ids=[c[0] for c in CASES])
def test_the_sequence_holds_the_mean_at_every_batch_at_once(name, draw, truth):
    assert _held(lambda: _Mean(0.05), draw, truth) >= 0.95


def test_the_paired_sequence_holds_the_difference_of_correlated_verdicts():
    def draw(r):  # one difficulty per example, shared by both configurations: B passes 0.1 more often
        difficulty = r.random(STEPS)
        return (difficulty < 0.5).astype(float), (difficulty < 0.6).astype(float)

    assert _held(lambda: _Paired(0.05), draw, 0.1, seed=1) >= 0.95


def test_a_fixed_sample_interval_read_after_every_batch_does_not_hold():
    """The reason for the module: the normal 95% interval, looked at after each of 30 batches, misses
    the truth somewhere along the way far more often than 5%."""
    rng = np.random.default_rng(2)
    held = 0
    for _ in range(SEQUENCES):
        x = (rng.random(STEPS) < 0.5).astype(float)
        n = np.arange(BATCH, STEPS + 1, BATCH)
        means = np.cumsum(x)[n - 1] / n
        margins = 1.96 * np.sqrt(means * (1 - means) / n)
        held += bool(np.all(np.abs(means - 0.5) <= margins))
    assert held / SEQUENCES < 0.80


def test_decisions_scaled_ranges_and_bad_values():
    far = ConfidenceSequence(0.05)
    far.update([1.0] * 95 + [0.0] * 5)
    assert far.above(0.8) and not far.below(0.99)
    latency = ConfidenceSequence(0.05, low=0.0, high=10.0)  # seconds, clipped at a stated 10 s
    latency.update([1.0, 2.0, 1.5] * 100)
    low, high = latency.interval()
    assert 0 <= low < 1.5 < high < 10 and latency.below(3.0)
    blank = ConfidenceSequence()
    blank.update([None, math.nan])
    assert blank.n == 0 and blank.interval() == (0.0, 1.0)
    with pytest.raises(ValueError, match=r"1.5 lies outside the range \[0.0, 1.0\]"):
        blank.update([1.5])
    with pytest.raises(ValueError, match="alpha"):
        ConfidenceSequence(alpha=1.5)


def test_its_state_does_not_grow_with_the_examples():
    cs = ConfidenceSequence()
    cs.update([0.5])
    before = {k: type(v) for k, v in vars(cs).items()}
    cs.update(np.random.default_rng(3).random(20_000).tolist())
    assert {k: type(v) for k, v in vars(cs).items()} == before and all(
        isinstance(v, (int, float)) for v in vars(cs).values())
