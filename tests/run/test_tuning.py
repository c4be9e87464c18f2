"""``sweep.method: tpe`` (:mod:`ragmem.run.tuning`): each grid key as Optuna's distribution, the settings a
tpe sweep refuses before any call, and its pruner (the race's test) against scores with a known
answer: a trial clearly worse than the best finished one is pruned within a few batches, one as good
never is, for either goal. The whole sweep, its pruning on the shipped data and its resume after
Ctrl+C: ``tests/e2e/test_tpe.py``."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from ragmem.config.loading import RunConfig
from ragmem.errors import ConfigError
from ragmem.run import prepare, sweep as sweeps, tuning

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _spec(grid: dict, **more) -> sweeps.SweepSpec:
    return sweeps.parse_sweep({"method": "tpe", "trials": 4, "grid": grid, **more})


def test_each_key_becomes_optunas_distribution():
    found = tuning.distributions(_spec({"retriever.type": ["bm25", "tfidf"], "retriever.top_k": {"low": 1, "high": 20},
                                        "corpus.chunk_size": {"low": 100, "high": 800, "step": 50},
                                        "judge.threshold": {"low": 0.5, "high": 0.9},
                                        "retriever.hybrid_alpha": {"low": 0.01, "high": 1.0, "log": True}}))
    assert found["retriever.type"] == CategoricalDistribution(["bm25", "tfidf"])
    assert found["retriever.top_k"] == IntDistribution(1, 20)
    assert found["corpus.chunk_size"] == IntDistribution(100, 800, step=50)
    assert found["judge.threshold"] == FloatDistribution(0.5, 0.9)
    assert found["retriever.hybrid_alpha"] == FloatDistribution(0.01, 1.0, log=True)


def test_a_tpe_sweep_is_checked_at_the_ends_of_its_ranges():
    spec = _spec({"retriever.top_k": {"low": 1, "high": 20}, "retriever.type": ["bm25", "tfidf"]})
    assert sweeps.expand(spec) == [{"retriever.top_k": 1, "retriever.type": "bm25"},
                                   {"retriever.top_k": 20, "retriever.type": "bm25"},
                                   {"retriever.top_k": 1, "retriever.type": "tfidf"}]


def _config(sweep: dict) -> RunConfig:
    base = RunConfig.from_dict({"data": {"files": [{"path": str(ROOT / "ragmem/datasets/sweep_eval.json")}]},
                                "agent": {"type": "reference"},
                                "corpus": {"path": str(ROOT / "ragmem/datasets/sweep_corpus.json")}}).raw
    return RunConfig.from_dict({**base, "sweep": sweep})


@pytest.mark.parametrize("sweep, message", [
    ({"grid": {"retriever.top_k": {"low": 1, "high": 20}}},
     "sweep.grid.retriever.top_k: a range {low, high} needs method tpe"),
    ({"method": "tpe", "grid": {"retriever.top_k": [1, 3]}}, "method tpe: expected trials: N"),
    ({"method": "tpe", "trials": 4, "grid": {"retriever.top_k": {"low": 0, "high": 20}},
      "objective": {"metric": "ndcg_at_10"}}, r"sweep.grid \(top_k=0\): retriever.top_k"),
    ({"method": "tpe", "trials": 4, "grid": {"retriever.top_k": {"low": 1, "high": 5}}, "objective": {"metric": "f1"}},
     "sweep.objective.metric: f1 has no per-example score in \\[0, 1\\], which a tpe sweep's pruner compares"),
])
def test_settings_a_tpe_sweep_refuses_before_any_call(sweep, message):
    with pytest.raises(ConfigError, match=message):
        prepare.sweep_plan(_config(sweep), load=False)


def test_a_value_optuna_cannot_propose_is_refused():
    with pytest.raises(ConfigError, match="sweep.grid.corpus.path: method tpe proposes values of text"):
        tuning.distributions(_spec({"corpus.path": [["a.json", "b.json"]]}))


def _pruned_after(best: list[float], mine: list[float], goal: str = "maximize", batch: int = 10) -> int | None:
    pruner = tuning.Pruner(0.05, goal)
    pruner.scores[0], pruner.best = best, 0
    trial = SimpleNamespace(number=1)
    for end in range(batch, len(mine) + 1, batch):
        pruner.scores[1] = mine[:end]
        if pruner.prune(None, trial):
            return end
    return None


def test_the_pruner_prunes_a_clearly_worse_trial_and_never_an_equal_one():
    rng = np.random.default_rng(0)
    best = rng.binomial(1, 0.8, 400).astype(float).tolist()
    worse = [b if rng.random() < 0.6 else 0.0 for b in best]  # (paired: loses 40% of the best's passes)
    assert (_pruned_after(best, worse) or 10**9) <= 100
    assert _pruned_after(best, list(best)) is None
    flipped = [1 - b for b in best]  # a lower-is-better objective: the best's values are the low ones
    assert (_pruned_after(flipped, [1 - w for w in worse], goal="minimize") or 10**9) <= 100
    assert _pruned_after(best, worse, goal="minimize") is None  # (worse for a maximum is better for a minimum)


def test_the_pruners_error_rate_on_equal_trials_stays_under_alpha():
    rng = np.random.default_rng(1)
    pruned = 0
    for _ in range(200):
        best = rng.binomial(1, 0.7, 200).astype(float).tolist()
        other = rng.binomial(1, 0.7, 200).astype(float).tolist()  # the same truth, judged apart
        pruned += _pruned_after(best, other, batch=20) is not None
    assert pruned / 200 <= 0.05
