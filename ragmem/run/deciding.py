"""Gates that stop judging once their verdict is certain (``gates.stop_when_decided``,
``ragmem run --stop-when-decided``).

The run answers and judges in batches of :data:`BATCH` examples, in the data's order; after each
batch every gate's anytime-valid confidence sequence (:mod:`ragmem.stats.sequential`, at level
``stats.confidence`` split over the gates) is looked at, and once each gate's interval lies wholly on
one side of each of its bounds (above or below ``min``; below or above ``max``) no further example is
answered or judged: the run is scored on the examples judged so far, its gates checked as always
(exit 0 or 3), and the summary says ``decided after N of M examples``. The sequence may be looked at
after every batch and still hold: a gate decided this way is wrong with probability at most
``1 - stats.confidence``, however early it stopped.

A gate has a sequence when its metric is the mean of a per-example score in [0, 1] (the catalogue's
``column`` with ``unit`` score): ``pass_rate`` follows the verdicts as they come back; any other such
metric (``faithfulness``, ``avg_coverage``, ``ndcg_at_10`` ...) is scored on each batch with the
run's own scoring (:func:`batch_scores`; an LLM-judged metric's replies served again from the judge
cache when the run scores). An example whose score is not defined (a failed judgement) is left out. A
gate on an aggregate (``f1``, ``latency_p95``), a ``max_regression`` gate, an LLM-judged metric with
``judge.cache false`` (it would be asked twice) and a run read in chunks (``data.chunk_size``) have
none: the run says so before it starts and judges every example.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

import pandas as pd

from ragmem.metrics import catalogue
from ragmem.run.plain_steps import PLAIN
from ragmem.stats.sequential import ConfidenceSequence

log = logging.getLogger("ragmem")

#: the examples judged between two looks (a look costs nothing; a smaller batch stops closer to the
#: decision, a larger one keeps the judge's requests concurrent)
BATCH = 20
#: what the answers and verdicts say without scoring the batch: the verdict, the agent's latency
_AS_ANSWERED = {"verdict", "latency_s"}
#: the families an LLM judge scores in the metrics step: scored on each batch, then by the run itself
ASKED_TWICE = tuple(f for f in catalogue.JUDGED if f != "verdicts")  # (the verdicts: asked once, by the judge step)


def batch_scores(examples: Sequence[Any], answered: Sequence[Any], judgements: Sequence[Any], components: Any,
                 cfg: Any, wanted: set[str]) -> dict[str, list]:
    """A batch's per-example columns ``wanted`` (``verdict``, ``latency_s``, ``faithfulness`` ...), each a
    list in the batch's order, ``None`` or NaN where not defined. The verdicts and latencies are read off
    the answers; any other column scores the batch as the run will (an LLM metric's replies kept in the
    judge cache for the run's own scoring)."""
    if wanted <= _AS_ANSWERED:
        return {"verdict": [None if j is None or j.verdict is None else float(j.verdict) for j in judgements],
                "latency_s": [o.latency_s for o in answered]}
    early, components.early = components.early, None  # (the run's own scoring keeps its head start)
    try:
        scored, _ = PLAIN.score_chunk(list(examples), list(answered), list(judgements), components, cfg, 0)
    finally:
        components.early = early
    return {c: pd.to_numeric(scored[c], errors="coerce").astype(float).tolist() if c in scored  # (NA: NaN)
            else [None] * len(examples) for c in wanted}


def _why_not(metric: str, gate: Any, cfg: Any) -> str | None:
    """Why a gate has no sequence as the run judges (``None``: it has one)."""
    if gate.max_regression is not None:
        return f"{metric}: a max_regression gate compares with a baseline run, judged whole"
    if catalogue.mean_of(metric) is None:
        return f"{metric}: not a mean of per-example scores in [0, 1]"
    if cfg.judge.asks_llm and not cfg.judge.cache and catalogue.family_of(metric) in ASKED_TWICE:
        return f"{metric}: judge.cache false would ask its judge twice (set judge.cache true)"
    return None


@dataclass
class _Gate:
    metric: str
    column: str
    low: float | None
    high: float | None
    sequence: ConfidenceSequence

    def decided(self) -> bool:
        """Each bound decided: the interval wholly on one side of it."""
        lo, hi = self.sequence.interval()
        return all(bound is None or lo > bound or hi < bound for bound in (self.low, self.high))

    def passes(self) -> bool:
        lo, hi = self.sequence.interval()
        return (self.low is None or lo > self.low) and (self.high is None or hi < self.high)

    def said(self) -> str:
        lo, hi = self.sequence.interval()
        bounds = " and ".join(f"{side} {value:g}" for side, value in (("min", self.low), ("max", self.high))
                              if value is not None)
        return f"{self.metric} [{lo:.4f}, {hi:.4f}] {'within' if self.passes() else 'outside'} {bounds}"


@dataclass
class Decider:
    """The gates' sequences of one run, fed batch by batch (:meth:`add`)."""

    gates: list[_Gate]
    undecidable: list[str] = field(default_factory=list)  # why each gate with no sequence has none
    judged: int = 0
    total: int = 0

    @classmethod
    def of(cls, cfg: Any, total: int, streamed: bool = False) -> "Decider | None":
        """The decider a run asks for (``None`` without ``gates.stop_when_decided`` or without gates, and
        for a run read in chunks, which says so); a gate that cannot stop the run is said once, before it starts."""
        if not getattr(cfg, "stops_when_decided", False) or not cfg.gates:
            return None
        if streamed:
            log.info("gates.stop_when_decided: a run read in chunks (data.chunk_size) judges every example")
            return None
        why = {m: _why_not(m, g, cfg) for m, g in cfg.gates.items()}
        alpha = (1 - cfg.stats.confidence) / max(len(cfg.gates), 1)  # (split over the gates: each decided at once)
        gates = [_Gate(m, str(catalogue.mean_of(m)), g.min, g.max, ConfidenceSequence(alpha))
                 for m, g in cfg.gates.items() if why[m] is None and (g.min is not None or g.max is not None)]
        decider = cls(gates, sorted(w for w in why.values() if w), 0, total)
        if decider.start_line():
            log.info("%s", decider.start_line())
        return decider

    @staticmethod
    def said(decider: "Decider | None", result: Any) -> Any:
        """``result`` (the run's :class:`ragmem.metrics.base.MetricResult`) with the decision in its notes
        and ``decided`` when the run stopped early: the examples not asked are said, never dropped silently."""
        if decider is not None and decider.decided:
            result.notes.append(decider.line())
            result.decided = decider.as_dict()
        return result

    batch = BATCH  # examples between two looks

    def before(self, index: int) -> bool:
        """Whether batch ``index`` is asked (a decided run has already left the loop)."""
        return True

    def after(self, examples: Sequence[Any], answered: Sequence[Any], judgements: Sequence[Any], components: Any,
              cfg: Any) -> None:
        """A batch was answered and judged (the protocol of :func:`ragmem.run.batching.answer_and_judge`,
        shared with a race's lanes, :mod:`ragmem.run.racing`)."""
        self.add(batch_scores(examples, answered, judgements, components, cfg, {g.column for g in self.gates}),
                 len(examples))

    def add(self, columns: dict[str, list], n: int) -> None:
        """A batch of ``n`` examples' per-example columns (``None`` or NaN: not defined, left out)."""
        self.judged += n
        for gate in self.gates:
            gate.sequence.update(columns[gate.column])

    @property
    def decided(self) -> bool:
        return bool(self.gates) and not self.undecidable and all(g.decided() for g in self.gates)

    def start_line(self) -> str | None:
        """What the run says before it starts, when a gate cannot stop it."""
        if not self.undecidable:
            return None
        return (f"gates.stop_when_decided: no sequence as the run judges for {'; '.join(self.undecidable)}: "
                "every example is judged")

    def as_dict(self) -> dict[str, Any]:
        """The summary's ``decided``: how many examples were judged of how many, and each gate's interval."""
        return {"after": self.judged, "of": self.total, "decided": self.decided,
                "gates": {g.metric: list(g.sequence.interval()) for g in self.gates},
                "confidence_each": 1 - self.gates[0].sequence.alpha if self.gates else None}

    def line(self) -> str:
        """``decided after 180 of 1,000 examples (gates.stop_when_decided): pass_rate [0.81, 0.95] within
        min 0.5; 820 examples not asked``."""
        left = self.total - self.judged
        return (f"decided after {self.judged:,} of {self.total:,} examples (gates.stop_when_decided): "
                + "; ".join(g.said() for g in self.gates) + f"; {left:,} examples not asked")
