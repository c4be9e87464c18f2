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

A gate has a sequence when its metric is known example by example as the run judges: ``pass_rate``
(the verdicts; a verdict that failed is left out). A gate on another metric (or a ``max_regression``
gate) has none yet, and a run read in chunks (``data.chunk_size``) is not stopped: the run says so
and judges every example.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

from ragmem.stats.sequential import ConfidenceSequence

log = logging.getLogger("ragmem")

#: the examples judged between two looks (a look costs nothing; a smaller batch stops closer to the
#: decision, a larger one keeps the judge's requests concurrent)
BATCH = 20
#: the gated metrics a sequence follows as the run judges, and how a batch gives their values
_SEQUENCED = ("pass_rate",)


@dataclass
class _Gate:
    metric: str
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
    undecidable: list[str] = field(default_factory=list)
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
        bounded = {m: g for m, g in cfg.gates.items() if g.min is not None or g.max is not None}
        alpha = (1 - cfg.stats.confidence) / max(len(cfg.gates), 1)  # (split over the gates: each decided at once)
        gates = [_Gate(m, g.min, g.max, ConfidenceSequence(alpha)) for m, g in bounded.items() if m in _SEQUENCED]
        undecidable = [m for m, g in cfg.gates.items() if m not in _SEQUENCED or g.max_regression is not None]
        decider = cls(gates, sorted(set(undecidable)), 0, total)
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
        self.add(judgements)

    def add(self, judgements: Sequence[Any]) -> None:
        """A batch's verdicts (one per example, ``None`` or a failed one: left out)."""
        self.judged += len(judgements)
        verdicts = [None if j is None or getattr(j, "verdict", None) is None else float(j.verdict) for j in judgements]
        for gate in self.gates:
            gate.sequence.update(verdicts)

    @property
    def decided(self) -> bool:
        return bool(self.gates) and not self.undecidable and all(g.decided() for g in self.gates)

    def start_line(self) -> str | None:
        """What the run says before it starts, when a gate cannot stop it."""
        if not self.undecidable:
            return None
        return (f"gates.stop_when_decided: {', '.join(self.undecidable)} has no sequence as the run judges "
                f"(only {', '.join(_SEQUENCED)}'s min/max gates do): every example is judged")

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
