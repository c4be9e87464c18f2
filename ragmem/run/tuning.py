"""Large spaces with Optuna (``sweep.method: tpe``): Optuna's TPE sampler proposes, ragmem runs and
judges, the race's test prunes.

    sweep:
      method: tpe
      trials: 12                                  # trials to finish (pruned and failed ones count)
      grid:
        retriever.type: [bm25, tfidf]             # a list: one of its values
        retriever.top_k: {low: 1, high: 20}       # a range of integers
        corpus.chunk_size: {low: 100, high: 800, step: 50}
      race: {batch: 20, alpha: 0.05}              # the pruner's look and its error

Each trial is an MLflow child of the sweep's parent (tags ``tpe.trial``, ``tpe.state``), judged on the
same examples in the same seeded order as a race (:func:`ragmem.run.racing.order`), a batch at a
time. After each batch the trial reports its running objective to Optuna (``trial.report``) and asks
the study's pruner (:class:`Pruner`): the trial is pruned once the e-process of its paired difference
to the best finished trial on the examples both were judged on (:class:`ragmem.stats.sequential.Evidence`,
the race's test) passes ``1 / alpha``. A pruned trial is told to Optuna as PRUNED and is never chosen;
the choice among the finished trials is a grid's (paired test against the top one, ``tie_break``).

The study lives in the ragmem home (``$RAGMEM_HOME/studies.db``, SQLite; named by the parent run id),
so ``ragmem sweep CONFIG --resume PARENT`` continues it: finished trials are kept (their runs read back
from MLflow, nothing judged again), a trial the interruption cut is proposed again first. Trials run one
after another: TPE proposes from what has finished. A configuration Optuna proposes again is not run
again: the trial takes the earlier one's result.

Limits: the best finished trial was picked on the same examples it is compared on, so a trial slightly
worse than it may be pruned a little more often than ``alpha`` says; a constraint that is not a
per-example score (``latency_p95``) is checked when the trial ends, not while it runs.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from typing import Any, Callable

import optuna
import pandas as pd
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from ragmem.clients import endpoints
from ragmem.config.loading import RunConfig
from ragmem.errors import ConfigError, failure_message
from ragmem.metrics import catalogue
from ragmem.run import resume as resumes, sweep as sweeps
from ragmem.run.journal import Journal
from ragmem.run.racing import in_order, Lane
from ragmem.runtime import interrupts, progress
from ragmem.runtime.home import ragmem_home
from ragmem.stats.sequential import differences, Evidence
from ragmem.tracking import end_unfinished, tracked_run

log = logging.getLogger("ragmem")

#: the file of the ragmem home that keeps the studies (one per tpe sweep, named by its parent run)
STUDIES = "studies.db"
#: what an interrupted tpe sweep says it did (the resume hint of :mod:`ragmem.exits`)
DONE = "trials done"
_PRIMITIVE = (str, int, float, bool, type(None))


def storage_url() -> str:
    return f"sqlite:///{ragmem_home() / STUDIES}"


def distributions(spec: Any) -> dict[str, BaseDistribution]:
    """Each grid key as Optuna's distribution: a list is categorical, a range of integers an
    :class:`IntDistribution`, another range a :class:`FloatDistribution`."""
    out: dict[str, BaseDistribution] = {}
    for key, values in spec.grid.items():
        if isinstance(values, list):
            odd = [v for v in values if not isinstance(v, _PRIMITIVE)]
            if odd:
                raise ConfigError(f"sweep.grid.{key}: method tpe proposes values of text, numbers, true/false or null; "
                                  f"got {odd[0]!r} (use method grid)")
            out[key] = CategoricalDistribution(values)
        elif all(isinstance(values.get(k, 1), int) and not isinstance(values.get(k, 1), bool) for k in ("low", "high", "step")):
            out[key] = IntDistribution(values["low"], values["high"], log=values.get("log", False),
                                       step=values.get("step", 1))
        else:
            out[key] = FloatDistribution(float(values["low"]), float(values["high"]), log=values.get("log", False),
                                         step=values.get("step"))
    return out


class Pruner(optuna.pruners.BasePruner):
    """The race's test as Optuna's pruner: a trial is pruned once it is worse than the best finished
    trial with confidence (the e-process of their paired difference at ``1 / alpha``)."""

    def __init__(self, alpha: float, goal: str):
        self.alpha, self.maximize = alpha, goal == "maximize"
        self.scores: dict[int, list[float | None]] = {}   # each trial's objective, example by example, in order
        self.best: int | None = None                      # the best finished trial's number
        self.said: dict[int, dict[str, Any]] = {}         # a pruned trial: against which, after how many, evidence

    def evidence(self, number: int) -> Evidence:
        """The e-process of "the best finished trial is better than trial ``number``" so far."""
        mine, theirs = self.scores.get(number, []), self.scores[self.best]  # type: ignore[index]
        test = Evidence(self.alpha, 0.0, -1.0, 1.0, "above")
        test.update(differences(mine, theirs[:len(mine)]) if self.maximize else differences(theirs, mine))
        return test

    def prune(self, study: Any, trial: Any) -> bool:
        if self.best is None or self.best == trial.number:
            return False
        test = self.evidence(trial.number)
        if test.rejected:
            self.said[trial.number] = {"against": self.best, "after": len(self.scores[trial.number]),
                                       "evidence": round(test.value, 3), "evidence_needed": round(1 / self.alpha, 3)}
        return test.rejected


class _Reads:
    """What :meth:`ragmem.run.racing.Lane.measure` reads of its racer: the objective's column."""

    columns: list = []

    def __init__(self, objective: str, batch: int):
        self.objective, self.batch = objective, batch


class TrialLane(Lane):
    """One trial's evaluation, batch by batch: the decider protocol of
    :func:`ragmem.run.batching.answer_and_judge` (as a race's lane)."""

    def __init__(self, trial: Any, pruner: Pruner, objective: str, batch: int, examples: int):
        self.racer = _Reads(objective, batch)  # type: ignore[assignment]  # (measure reads its objective)
        self.index, self.batch, self.examples = trial.number, batch, examples
        self.trial, self.pruner = trial, pruner
        self.scores = pruner.scores.setdefault(trial.number, [])
        self.pruned_at: int | None = None

    def before(self, index: int) -> bool:
        interrupts.check()
        return self.pruned_at is None

    def after(self, examples, answered, judgements, components, cfg) -> None:
        objective, _ = self.measure(examples, answered, judgements, components, cfg)
        self.scores.extend(objective)
        defined = [v for v in self.scores if v is not None and not math.isnan(v)]
        if defined:
            self.trial.report(sum(defined) / len(defined), step=len(self.scores))
        if len(self.scores) < self.examples and self.trial.should_prune():  # (judged whole: it finishes)
            self.pruned_at = len(self.scores)

    def leave(self, failed: str | None = None) -> None:
        pass


def _study(parent_id: str | None, spec: Any, seed: int, pruner: Pruner, resume: str | None) -> Any:
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # (ragmem says what each trial did)
    startup = min(10, max(3, (spec.trials or 0) // 3))
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup)
    storage = storage_url() if parent_id else None  # (untracked: a study in memory, not resumed)
    if resume:
        try:
            return optuna.load_study(study_name=resume, storage=storage_url(), sampler=sampler, pruner=pruner)
        except KeyError:
            raise ConfigError(f"--resume {resume}: no tpe study of this sweep in {ragmem_home() / STUDIES}") from None
    return optuna.create_study(study_name=parent_id, storage=storage, sampler=sampler, pruner=pruner,
                               direction="maximize" if spec.goal == "maximize" else "minimize")


def _counted(trial: Any) -> bool:
    """A trial that counts towards ``sweep.trials``: finished, pruned, or failed (not one cut by an interruption)."""
    return trial.state in (TrialState.COMPLETE, TrialState.PRUNED) or (
        trial.state == TrialState.FAIL and "failed" in trial.user_attrs)


def tune(cfg: RunConfig, steps: Any, plan: Any, *, child: Callable[..., Any], tracker: Any,
         tags: dict[str, str] | None = None, preflight: bool = True, resume: str | None = None) -> dict[str, Any]:
    """A ``sweep.method: tpe`` sweep, from its checked ``plan`` to its summary (``sweep.json``)."""
    spec, dists = plan.spec, distributions(plan.spec)
    dataset = steps.load(plan.configs[0], next(iter(plan.datasets.values())))
    dataset = in_order(dataset, cfg.seed, "a tpe sweep")
    if preflight:
        endpoints.preflight(list(dict.fromkeys(e for c in plan.configs for e in endpoints.configured(c))), log=log.info)
    meta = {"config": resumes.compared_config(cfg), "data.sha256": dataset.sha256, "experiment": cfg.experiment}
    if resume:
        if tracker is None:
            raise ConfigError(f"--resume {resume}: a sweep is resumed from its MLflow runs; tracking.enabled must be true")
        resumes.check_resumable(Journal.read_meta_for(resume), meta["config"], meta["data.sha256"], resume,
                                str(Journal.folder_for(resume).parent))
        tracker.reopen(resume, allow_finished=True)
    pruner = Pruner(spec.race["alpha"], spec.goal)
    interrupts.STOP.clear()
    with tracked_run(tracker, cfg.experiment, cfg.run_name or "sweep-tpe", run_id=resume,
                     tags={"ragmem.entry": "sweep", "ragmem.sweep.method": "tpe", **(tags or {})}) as parent:
        if parent.id is not None and not resume:
            Journal.write_meta_for(parent.id, meta)
        steps.log_results(parent, params={"sweep.grid": json.dumps(spec.grid), "sweep.method": "tpe",
                                          "sweep.trials": spec.trials, "sweep.objective": f"{spec.goal} {spec.metric}",
                                          "sweep.constraints": list(spec.constraints), "data.sha256": dataset.sha256})
        study = _study(parent.id, spec, cfg.seed, pruner, resume)
        trials = _Trials(cfg, steps, plan, dists, dataset, study, pruner, tracker, parent.id, child)
        trials.read_back()
        trials.run()
        children, tables = trials.children()
        top = sweeps.pick_best(children, spec)
        if top is not None:
            sweeps.mark_against_best(children, tables, children.index(top), spec, cfg)
        best = sweeps.choose(children, spec)
        summary = sweeps.summary(parent.id, cfg, spec, children, best, 0, plan.base) | {"tpe": trials.record()}
        record = sweeps.parent_record(children, best, spec, cfg, summary)
        record["metrics"].update({f"tpe.{k}": float(v) for k, v in summary["tpe"]["counts"].items()})
        steps.log_results(parent, **record)
    return summary


class _Trials:
    """The trials of one study: proposed, run as MLflow children, told to Optuna, read back on a resume."""

    def __init__(self, cfg, steps, plan, dists, dataset, study, pruner: Pruner, tracker, parent_id, child):
        self.cfg, self.steps, self.plan, self.dists, self.dataset = cfg, steps, plan, dists, dataset
        self.study, self.pruner, self.tracker, self.parent_id, self.child = study, pruner, tracker, parent_id, child
        self.spec = plan.spec
        self.objective = str(catalogue.mean_of(self.spec.metric))  # (checked)
        self.results: dict[int, dict[str, Any]] = {}  # trial number -> {"run_id", "params", "outcome", ...}

    # -- a resume: what the study already holds ----------------------------------------------------

    def read_back(self) -> None:
        """The finished trials' runs read back (the pruner's best among them); a trial cut by the
        interruption told FAIL and proposed again first."""
        ids = [e.id for e in self.dataset.examples]
        for trial in self.study.get_trials(deepcopy=False):
            run_id = trial.user_attrs.get("run_id")
            if trial.state == TrialState.RUNNING:  # (cut: left running by the interruption, or a killed process)
                self.study.tell(trial.number, state=TrialState.FAIL)
                self.study.enqueue_trial(trial.params)
                log.info("tpe: trial %d was cut by the interruption: proposed again", trial.number)
                continue
            if trial.state not in (TrialState.COMPLETE, TrialState.PRUNED) or not run_id or trial.user_attrs.get("same_as") is not None:
                continue
            found = resumes.finished_child(self.tracker, run_id)
            whole = found["table"].frame() if hasattr(found["table"], "frame") else found["table"]
            table = whole.set_index("id").reindex(ids) if "id" in whole else None
            scores = pd.to_numeric(table[self.objective], errors="coerce").astype(float).tolist() \
                if table is not None and self.objective in table else []
            self.pruner.scores[trial.number] = scores[:int(trial.user_attrs.get("judged", len(scores)))]
            self.results[trial.number] = {"run_id": run_id, "params": trial.params, "state": trial.state.name,
                                          "metrics": found["metrics"], "table": found["table"], "ci": {}}
            if trial.state == TrialState.COMPLETE:
                self._maybe_best(trial.number, trial.value, trial.user_attrs.get("constraints", [0.0]))
        if self.results:
            log.info("tpe: %d trials finished before, kept (nothing judged again)", len(self.results))

    def _maybe_best(self, number: int, value: float | None, constraints: list[float]) -> None:
        if value is None or any(c > 0 for c in constraints):
            return
        best = self.pruner.best
        current = None if best is None else self.results[best]["metrics"].get(self.spec.metric)
        if current is None or (value > current if self.spec.goal == "maximize" else value < current):
            self.pruner.best = number

    # -- proposing and running -----------------------------------------------------------------------

    def run(self) -> None:
        target = int(self.spec.trials)
        done = sum(_counted(t) for t in self.study.get_trials(deepcopy=False))
        with progress.stage("sweep", target, unit="trials") as stage, progress.fold(stage):
            stage.advance(done)
            while done < target:
                trial = None
                try:  # (an interruption anywhere here: the trial cut, if any, and the resume hint)
                    trial = self.study.ask(self.dists)
                    self._one(trial, done + 1, target)
                    done += 1
                    stage.advance(1)
                except BaseException as exc:
                    self._interrupted(trial, exc, done, target)
                    raise

    def _one(self, trial: Any, n: int, target: int) -> None:
        point = dict(trial.params)
        name = sweeps.child_name(point)
        same = next((k for k, r in self.results.items() if r["params"] == point), None)
        if same is not None:  # proposed again: the earlier trial's result, nothing run
            trial.set_user_attr("same_as", same)
            earlier = self.results[same]
            self.study.tell(trial, earlier["metrics"].get(self.spec.metric) if earlier["state"] == "COMPLETE" else None,
                            state=TrialState[earlier["state"]] if earlier["state"] != "FAILED" else TrialState.FAIL)
            log.info("tpe: trial %d (%d of %d) %s: the configuration of trial %d again: its result kept", trial.number, n, target, name, same)
            return
        try:
            config = RunConfig.from_dict(sweeps.apply_point(self.plan.base, point))
        except ConfigError as exc:
            trial.set_user_attr("failed", str(exc))
            self.study.tell(trial, state=TrialState.FAIL)
            log.info("tpe: trial %d (%d of %d) %s: not a valid configuration: %s", trial.number, n, target, name, exc)
            return
        run_id = self.tracker.create_run(self.cfg.experiment, name, parent_run_id=self.parent_id, tags={
            "ragmem.entry": "sweep-child", "ragmem.run.sweep.point": resumes.point_key(point),
            "tpe.trial": str(trial.number)}) if self.tracker else None
        if run_id:
            trial.set_user_attr("run_id", run_id)
        lane = TrialLane(trial, self.pruner, self.objective, int(self.spec.race["batch"]), len(self.dataset))
        ((status, value),) = self.steps.children(self.child, [(config, run_id, self.dataset, False, None, lane)], 1)
        self._told(trial, n, target, name, run_id, lane, status, value)

    def _told(self, trial, n, target, name, run_id, lane: TrialLane, status: str, value: Any) -> None:
        """The trial's outcome told to Optuna, tagged on its run, kept for the summary."""
        metric = self.spec.metric
        result = {"run_id": run_id, "params": dict(trial.params), "metrics": {}, "table": None, "ci": {}}
        self.results[trial.number] = result
        if status != "ok":
            result.update(state="FAILED", error=value)
            trial.set_user_attr("failed", str(value))
            end_unfinished(self.tracker, [run_id] if run_id else [], "FAILED", str(value))
            self.study.tell(trial, state=TrialState.FAIL)
            log.info("tpe: trial %d (%d of %d) %s failed: %s", trial.number, n, target, name, value)
        else:
            result.update(metrics=value["metrics"], table=value["table"], ci=value.get("ci", {}))
            trial.set_user_attr("judged", len(lane.scores))
            if lane.pruned_at is not None:
                said = self.pruner.said[trial.number]
                result.update(state="PRUNED", pruned=said)
                self.study.tell(trial, state=TrialState.PRUNED)
                log.info("tpe: trial %d (%d of %d) %s pruned after %d examples: worse than trial %d (evidence %.3g > %.3g)",
                         trial.number, n, target, name, lane.pruned_at, said["against"], said["evidence"],
                         said["evidence_needed"])
            else:
                objective = value["metrics"].get(metric)
                constraints = [0.0 if sweeps.feasible(value["metrics"], dataclasses.replace(self.spec, constraints=(c,)))
                               else 1.0 for c in self.spec.constraints] or [0.0]
                trial.set_user_attr("constraints", constraints)
                for c, value in zip(self.spec.constraints, constraints):  # (TPE keeps to the feasible ones)
                    trial.set_constraint(c["metric"], value)
                result["state"] = "COMPLETE" if objective is not None else "FAILED"
                if objective is None:
                    trial.set_user_attr("failed", f"{metric} null")
                self.study.tell(trial, objective, state=TrialState.COMPLETE if objective is not None else TrialState.FAIL)
                if objective is not None:
                    self._maybe_best(trial.number, objective, constraints)
                log.info("tpe: trial %d (%d of %d) %s: %s %s%s", trial.number, n, target, name, metric,
                         "null" if objective is None else f"{objective:.4f}",
                         " (best so far)" if self.pruner.best == trial.number else "")
        if self.tracker and run_id:
            self.tracker.set_tags(run_id, {"tpe.state": result["state"], "tpe.judged": str(len(lane.scores)),
                                           **({"tpe.pruned_by": str(self.results[result["pruned"]["against"]]["run_id"])}
                                              if "pruned" in result else {})})

    def _interrupted(self, trial: Any, exc: BaseException, done: int, target: int) -> None:
        """The trial cut (``None``: between two): left RUNNING in the study (a resume tells it FAIL and
        proposes it again first, as after a killed process), its run ended, the resume hint."""
        interrupts.STOP.set()
        run_id = trial.user_attrs.get("run_id") if trial is not None else None
        end_unfinished(self.tracker, [run_id] if run_id else [], "KILLED" if isinstance(exc, KeyboardInterrupt)
                       else "FAILED", f"sweep ended: {failure_message(exc)}")
        try:  # (what the study holds: a trial told just before the cut counts, whatever the loop had counted)
            done = sum(_counted(t) for t in self.study.get_trials(deepcopy=False))
        except Exception as unread:  # (a store that went away: the loop's count)
            log.debug("tpe: the study not read after the cut: %s", unread)
        exc.ragmem_progress = (self.parent_id, done, target, DONE)  # type: ignore[attr-defined]

    # -- the record ----------------------------------------------------------------------------------

    def children(self) -> tuple[list[dict[str, Any]], dict[int, Any]]:
        """The trials that ran, as a sweep's children (a pruned one never a candidate), and their tables."""
        children: list[dict[str, Any]] = []
        tables: dict[int, Any] = {}
        for number in sorted(self.results):
            r = self.results[number]
            finished = r["state"] in ("COMPLETE", "PRUNED")
            child = {"run_id": r["run_id"], "params": r["params"], "metrics": r["metrics"] if finished else {},
                     "status": "FINISHED" if finished else "FAILED", "error": r.get("error"), "ci": r.get("ci", {}),
                     "tpe": {"trial": number, "state": r["state"], **({"pruned": r["pruned"]} if "pruned" in r else {})},
                     "race": {"candidate": r["state"] == "COMPLETE",
                              "stopped_at": len(self.pruner.scores.get(number, [])),
                              "reason": "pruned" if r["state"] == "PRUNED" else r["state"].lower()}}
            if finished and r["table"] is not None:
                tables[len(children)] = r["table"]
            children.append(child)
        return children, tables

    def record(self) -> dict[str, Any]:
        """``sweep.json``'s ``tpe``: the study, where it is kept, and its trials by state."""
        states = [t.state.name for t in self.study.get_trials(deepcopy=False)]
        return {"study": self.study.study_name, "storage": storage_url() if self.parent_id else None,
                "trials": self.spec.trials, "batch": int(self.spec.race["batch"]), "alpha": self.pruner.alpha,
                "counts": {s.lower(): states.count(s) for s in ("COMPLETE", "PRUNED", "FAIL")},
                "best_trial": self.pruner.best}
