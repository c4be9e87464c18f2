"""A racing sweep (``sweep.method: race``): every configuration answers and is judged on the same
examples in the same seeded order, a batch at a time, and stops once the race rules it out
(:mod:`ragmem.stats.racing`): no more agent calls, no more judge requests.

Each configuration is still one child run evaluated by :func:`ragmem.run.engine.evaluate`; its loop of
batches (:func:`ragmem.run.batching.answer_and_judge`) is driven by its :class:`Lane`. A lane asks the
:class:`Racer` before each batch (it waits until every configuration still running has finished the
last one and the race has decided) and reports the batch's objective (and raced constraints) after it.
At most ``sweep.max_parallel`` lanes work on a batch at once; the others wait (the children all run, as
threads, from the start). A stopped child scores and logs the examples it was judged on, as any run.

``sweep.budget.judge_requests`` is kept two ways: before a round, the race ends (``budget``) when the
round would need more requests than are left (at the rate measured so far); and no request past the
budget is ever sent (:func:`ragmem.clients.calls.allowance`): one refused is the judgement's failure,
with its reason, and the race ends after that round.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
import threading
from collections import OrderedDict
from typing import Any, Iterator, Sequence

from ragmem.clients import calls
from ragmem.errors import ConfigError
from ragmem.metrics import catalogue
from ragmem.run import pipeline
from ragmem.run.deciding import ASKED_TWICE, batch_scores
from ragmem.run.sweep import child_name
from ragmem.runtime import interrupts
from ragmem.tracking.store import OPEN_RUNS
from ragmem.stats.racing import BUDGET, Race, raced_bound, RacedBound, Stop, SURVIVED, TIED, WORSE

log = logging.getLogger("ragmem")

_WAIT_S = 0.5  # a lane waiting for its round wakes this often to see a stop (Ctrl+C)
#: the most configurations a race runs: each is a thread and, tracked, an open MLflow run at once
RACE_MOST = OPEN_RUNS


def check(plan: Any) -> None:
    """Every setting a race (or a tpe sweep, whose pruner is the race's test) needs, checked before any
    call (a ConfigError naming the setting)."""
    spec = plan.spec
    method, what = spec.method, "a race" if spec.method == "race" else "a tpe sweep's pruner"
    if spec.races and len(plan.points) > RACE_MOST:
        raise ConfigError(f"sweep.method race: {len(plan.points)} configurations; a race runs every configuration at "
                          f"once, at most {RACE_MOST} (draw fewer with sweep.samples)")
    if catalogue.mean_of(spec.metric) is None:
        raise ConfigError(f"sweep.objective.metric: {spec.metric} has no per-example score in [0, 1], which {what} "
                          "compares example by example (e.g. pass_rate, ndcg_at_10, faithfulness): use sweep.method grid")
    files = {tuple(c.files) for c in plan.configs}
    if len(files) > 1 or any(k.startswith("data.") for k in spec.grid):
        raise ConfigError(f"sweep.grid: {what} compares configurations on the same examples: the grid may not vary data.*")
    usd = (spec.budget or {}).get("usd")
    for c in plan.configs:
        if usd is not None and (not c.judge.asks_llm or c.judge.model not in c.judge.prices):
            raise ConfigError(f"sweep.budget.usd: judge.prices has no price for the judge's model {c.judge.model!r} "
                              "(USD per million tokens: judge.prices: {MODEL: {input: X, output: Y}}): a dollar "
                              "budget is kept from it")
        if c.orchestration.task_runner == "dask":
            raise ConfigError(f"sweep.method {method}: its configurations are judged batch by batch on threads of one "
                              "process: orchestration.task_runner dask is not supported (use sweep.method grid)")
        if c.judge.asks_llm and not c.judge.cache and any(catalogue.family_of(n) in ASKED_TWICE
                                                          for n in pipeline.selected(c)):
            raise ConfigError(f"sweep.method {method}: judge.cache false would send the LLM metrics' requests twice "
                              "(to decide as it goes, then to score each run): set judge.cache true")


def in_order(dataset: Any, seed: int, what: str) -> Any:
    """``dataset`` with its examples in the race's seeded :func:`order` (a race's, or a tpe sweep's:
    ``what``, for the line that refuses data read in chunks, which cannot be held)."""
    if dataset.streamed:
        raise ConfigError(f"data.chunk_size: the data ({len(dataset):,} examples) is read in chunks of "
                          f"{dataset.chunk_size:,}; {what} holds its examples (raise data.chunk_size)")
    return dataclasses.replace(dataset, examples=order(dataset.examples, seed))


def order(examples: Sequence[Any], seed: int) -> list[Any]:
    """The examples in the race's seeded order: sessions (or lone examples) shuffled with ``seed``, the
    turns of a session kept in their order (a file sorted by topic would otherwise race on one topic)."""
    groups: OrderedDict[str, list[Any]] = OrderedDict()
    for e in examples:
        groups.setdefault(e.session_id or f"\0{e.id}", []).append(e)
    keys = list(groups)
    random.Random(seed).shuffle(keys)
    return [e for k in keys for e in groups[k]]


def _bounds(spec: Any) -> list[tuple[RacedBound, str]]:
    """The constraints the race can test example by example, each with its per-example column."""
    out = []
    for c in spec.constraints:
        column = catalogue.mean_of(c["metric"])
        bound = raced_bound(c["metric"], c.get("min"), c.get("max"), column is not None)
        if bound is not None:
            out.append((bound, "latency_s" if bound.kind == "exceeds" else str(column)))
    return out


class Racer:
    """The race of one sweep's children, shared by their lanes (threads)."""

    def __init__(self, spec: Any, names: list[str], examples: int):
        settings = spec.race  # (sweep.race, its defaults filled: ragmem.config.sweep_settings.RaceSettings)
        self.spec, self.names, self.examples = spec, names, examples
        self.batch = int(settings["batch"])
        self.columns = _bounds(spec)
        self.objective = str(catalogue.mean_of(spec.metric))  # (check: a column)
        self.race = Race(len(names), settings["alpha"], settings["indifference"], spec.goal,
                         bounds=[b for b, _ in self.columns])
        self.budget = (spec.budget or {}).get("judge_requests")
        self.budget_usd = (spec.budget or {}).get("usd")
        self.allowance = calls.Allowance("judge", self.budget, "sweep.budget.judge_requests", self.budget_usd,
                                         "sweep.budget.usd")
        self._cond = threading.Condition()
        self._slots = threading.Semaphore(spec.max_parallel)
        self._reported = [0] * len(names)
        self._decided = 0   # rounds decided

    def lane(self, i: int) -> "Lane":
        return Lane(self, i)

    # -- the lanes' side ---------------------------------------------------------------------------

    def wait_for(self, i: int, index: int) -> bool:
        """Lane ``i`` may ask batch ``index``: once the rounds before it are decided; ``False`` when it has
        stopped or the race is over. Then it waits for a free slot (``sweep.max_parallel``)."""
        with self._cond:
            while self._decided < index and i in self.race.running and not self.race.over:
                self._cond.wait(_WAIT_S)
                interrupts.check()
            if i not in self.race.running or self.race.over:
                return False
        while not self._slots.acquire(timeout=_WAIT_S):
            interrupts.check()
        return True

    def report(self, i: int, objective: list, bounds: dict[str, list]) -> None:
        """Lane ``i``'s batch: its values added, its slot freed, the round decided when it was the last."""
        self._slots.release()
        with self._cond:
            self.race.add(i, objective, bounds)
            self._reported[i] += 1
            self._maybe_decide()

    def leave(self, i: int, failed: str | None = None) -> None:
        """Lane ``i``'s run has ended: out of examples (after its last round is decided: ``survived``
        unless ruled out), or failed (``failed: reason``, never a candidate)."""
        with self._cond:
            if failed is None:
                while self._decided < self._reported[i] and i in self.race.running and not self.race.over:
                    self._cond.wait(_WAIT_S)
            if i in self.race.running:
                self.race.retire(i, SURVIVED if failed is None else f"failed: {failed}")
            self._maybe_decide()
            self._cond.notify_all()

    # -- deciding ----------------------------------------------------------------------------------

    def _maybe_decide(self) -> None:
        running = self.race.running
        if self.race.over or not running or any(self._reported[j] <= self._decided for j in running):
            return
        stops = self.race.decide()
        self._decided += 1
        for i, stop in stops.items():
            if stop.reason not in (SURVIVED, TIED):
                log.info("race: %s stopped after %d examples: %s", self.names[i], stop.after, self.said(stop))
        spent = self._over_budget()
        if not self.race.over and spent:
            self.race.end(BUDGET)
            log.info("race: the budget (%s) would be spent by the next round: %d configurations left, each with its "
                     "interval", spent, len(self.race.candidates()))
        log.info("%s", self.progress())
        self._cond.notify_all()

    def _rate(self) -> float | None:
        """Judge requests per example judged, so far (None before any request)."""
        judged = sum(self.race.judged(i) for i in range(self.race.n))
        return self.allowance.sent / judged if judged and self.allowance.sent else None

    def _over_budget(self) -> str | None:
        """The budget the next round would pass at the rate measured so far (``None``: neither)."""
        judged = sum(self.race.judged(i) for i in range(self.race.n))
        todo = sum(min(self.batch, self.examples - self.race.judged(i)) for i in self.race.running)
        for limit, spent, said in ((self.budget, self.allowance.sent, f"sweep.budget.judge_requests {self.budget}"),
                                   (self.budget_usd, self.allowance.spent_usd, f"sweep.budget.usd {self.budget_usd}")):
            if limit is not None and (spent >= limit or (judged and spent + spent / judged * todo > limit)):
                return said
        return None

    def grid_requests(self) -> int | None:
        """What the grid would have paid: requests per example (as measured) x examples x configurations."""
        rate = self._rate()
        return None if rate is None else round(rate * self.examples * self.race.n)

    def progress(self) -> str:
        """``race: 140/1000 examples, 7 of 18 configurations left, 2,520 judge requests (grid 90,000)``."""
        judged = max((self.race.judged(i) for i in range(self.race.n)), default=0)
        grid = self.grid_requests()
        return (f"race: {judged:,}/{self.examples:,} examples, {len(self.race.running)} of {self.race.n} "
                f"configurations left, {self.allowance.sent:,} judge requests"
                + (f" (grid {grid:,})" if grid is not None else ""))

    def said(self, stop: Stop) -> str:
        """A stop's reason with the leader named: ``worse than top_k=5,type=bm25``."""
        if stop.reason.startswith(WORSE) and stop.leader is not None:
            return f"{WORSE} {self.names[stop.leader]}"
        return stop.reason

    # -- the record --------------------------------------------------------------------------------

    def child_record(self, i: int, run_ids: list) -> dict[str, Any]:
        """What child ``i``'s record gains (``race`` in sweep.json, tags ``race.*`` on its run)."""
        stop = self.race.stops.get(i)
        if stop is None:
            return {"candidate": False, "reason": "not raced", "stopped_at": self.race.judged(i)}
        out: dict[str, Any] = {"stopped_at": stop.after, "reason": self.said(stop),
                               "candidate": i in self.race.candidates(),
                               "interval": [round(v, 6) for v in stop.interval]}
        if stop.leader is not None:
            out["leader_run_id"] = run_ids[stop.leader]
            if stop.versus_leader is not None:
                out["versus_leader"] = [round(v, 6) for v in stop.versus_leader]
        if stop.evidence is not None:
            out["evidence"] = round(stop.evidence, 3)
            out["evidence_needed"] = round(1 / self.race.alpha_each, 3)
        return out

    def summary(self) -> dict[str, Any]:
        """The parent's ``race`` (sweep.json) and its metrics ``race.*``."""
        grid = self.grid_requests()
        out: dict[str, Any] = {"examples": self.examples, "rounds": self.race.rounds, "ended": self.race.ended,
               "batch": self.batch, "alpha": self.race.alpha, "indifference": self.race.indifference,
               "alpha_each": self.race.alpha_each, "judge_requests": self.allowance.sent,
               "grid_judge_requests": grid,
               "judge_requests_ratio": round(self.allowance.sent / grid, 4) if grid else None,
               "examples_judged": sum(self.race.judged(i) for i in range(self.race.n)),
               "grid_examples": self.examples * self.race.n,
               "raced_constraints": [b.metric for b, _ in self.columns]}
        out["judge_cost_usd"] = round(self.allowance.spent_usd, 6)
        if self.budget is not None or self.budget_usd is not None:
            out["budget"] = {"judge_requests": self.budget, "usd": self.budget_usd, "refused": self.allowance.refused}
        return out


class Lane:
    """One child's part in the race: the decider protocol of :func:`ragmem.run.batching.answer_and_judge`."""

    decided = False  # (a lane leaves the loop by :meth:`before`)

    def __init__(self, racer: Racer, index: int):
        self.racer, self.index = racer, index
        self.batch = racer.batch

    def before(self, index: int) -> bool:
        return self.racer.wait_for(self.index, index)

    def after(self, examples: Sequence[Any], answered: Sequence[Any], judgements: Sequence[Any], components: Any,
              cfg: Any) -> None:
        objective, bounds = self.measure(examples, answered, judgements, components, cfg)
        self.racer.report(self.index, objective, bounds)

    def measure(self, examples, answered, judgements, components, cfg) -> tuple[list, dict[str, list]]:
        """The batch's objective and raced constraints, example by example (``None``: not defined)."""
        wanted = {self.racer.objective, *(c for _, c in self.racer.columns)}
        table = batch_scores(examples, answered, judgements, components, cfg, wanted)
        return table[self.racer.objective], {b.metric: table[c] for b, c in self.racer.columns}

    def leave(self, failed: str | None = None) -> None:
        self.racer.leave(self.index, failed)


# ---- the engine's side (ragmem.run.engine.sweep) -------------------------------------------------

#: what an interrupted race says it did (no key: :mod:`ragmem.exits` offers the same command, not --resume)
_AGAIN = "a race is not resumed: run it again; the judge cache keeps what it paid for"
NOT_RESUMED = f"configurations done ({_AGAIN})"


def racer_for(plan: Any, datasets: dict, seed: int, resume: str | None) -> Racer | None:
    """The race of a ``sweep.method: race`` plan (``None`` for a grid), its data put in the race's seeded
    order (``datasets`` changed in place: every child reads the same examples in the same order)."""
    if not plan.spec.races:
        return None
    if resume:
        raise ConfigError(f"--resume: {_AGAIN}")
    for key, dataset in datasets.items():
        datasets[key] = in_order(dataset, seed, "a race")
    examples = len(next(iter(datasets.values())))
    log.info("race: %d configurations on %d examples, %d at a time, batches of %d", len(plan.points), examples,
             plan.spec.max_parallel, plan.spec.race["batch"])
    return Racer(plan.spec, [child_name(p) for p in plan.points], examples)


@contextlib.contextmanager
def spending(racer: Racer | None) -> Iterator[None]:
    """While a race runs: its allowance installed (every judge request counted; none past the budget)."""
    if racer is None:
        yield
        return
    with racer.allowance.installed():
        yield


@contextlib.contextmanager
def lane_of(lane: Lane | None) -> Iterator[None]:
    """A child's evaluation: its lane leaves the race however it ends (its data out, or failed)."""
    try:
        yield
    except BaseException as exc:
        if lane is not None:
            lane.leave(failed=type(exc).__name__)
        raise
    if lane is not None:
        lane.leave()


def recorded(racer: Racer | None, children: list[dict], child_ids: list, tracker: Any) -> None:
    """Each child's ``race`` record (sweep.json) and its tags ``race.stopped_at``, ``race.reason`` on its run."""
    if racer is None:
        return
    for i, child in enumerate(children):
        child["race"] = racer.child_record(i, child_ids)
        if tracker is not None and child_ids[i]:
            tracker.set_tags(child_ids[i], {f"race.{k}": str(child["race"][k]) for k in ("stopped_at", "reason",
                                            "interval", "evidence") if k in child["race"]})


def summary_of(racer: Racer | None) -> dict[str, Any]:
    """What sweep.json gains from a race: ``race`` (nothing for a grid)."""
    return {"race": racer.summary()} if racer is not None else {}
