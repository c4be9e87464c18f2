"""The run engine: the one place that orders the steps of an evaluation and owns the run's lifecycle.

    evaluate:      build agent and judge -> load -> open the MLflow run ->
                   per batch: time the agent -> journal -> judge  ->  metrics -> log
    sweep:         validate every grid point -> load once -> parent run ->
                   children (each an ``evaluate`` into its own child run) -> best -> log on the parent
    bench_memory:  load conversations -> parent run -> per memory layer, a child run:
                   ingest + answer each conversation -> judge -> score -> log

Each step is a method of a :class:`Steps` driver. This module's ``Steps`` runs them as plain calls
(``ragmem.evaluate``, pytest, notebooks); ``ragmem.tasks.steps.PrefectSteps`` runs the same methods
as Prefect tasks (``ragmem run``, ``sweep``, ``serve``, ``bench-memory``). Either way the order,
the journal, the MLflow run (:func:`ragmem.tracking.tracked_run`) and what is logged are the same.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ragmem.clients import endpoints
from ragmem.config.loading import RunConfig
from ragmem.config.secrets import mask, scrub
from ragmem.data.loaders import Dataset
from ragmem.errors import failure_message  # noqa: F401  (also ragmem.run.engine.failure_message)
from ragmem.judges import labels
from ragmem.memory import bench_compare, bench_data, benchmark as memory_bench, layers as memory_layers
from ragmem.prompts.templates import prompt_hash, PROMPT_VERSION
from ragmem.report import html as report_html
from ragmem.run import batching, gates, judge_sweep, pipeline, prepare, resume as resumes, summary as summaries
from ragmem.run.deciding import Decider
from ragmem.run import bench_figures, drift, racing, sweep as sweeps, traffic, windows
from ragmem.run.journal import Journal
from ragmem.run.plain_steps import PLAIN, Steps  # noqa: F401  (also ragmem.run.engine.Steps, PLAIN)
from ragmem.run.prepare import SweepPlan
from ragmem.runtime import interrupts, progress, space
from ragmem.schema import AgentOutput
from ragmem.text import plural
from ragmem.tracking import end_unfinished, files, is_transient, tracked_run, TrackedRun, Tracker

log = logging.getLogger("ragmem")


@dataclass
class EvaluationResult:
    """Aggregates in ``metrics``, one row per example in ``table``, and the summary dict."""

    metrics: dict[str, float | None]
    _table: pd.DataFrame | None  # None: read from table_path when first asked for (a streamed run's)
    summary: dict[str, Any]
    run_id: str | None = None
    params: dict[str, str] = field(default_factory=dict)
    index_builds: int = 0  # reference-agent indexes this run built (0 when it reused one)
    journal_key: str | None = None  # the run's journal (its run id, or untracked-...): its agent answers
    table_path: Path | None = None  # a streamed run's examples.parquet

    @property
    def table(self) -> pd.DataFrame:
        """One row per example (a streamed run's read from its Parquet file the first time)."""
        if self._table is None:
            self._table = files.read_table(self.table_path)  # type: ignore[arg-type]  # (set when streamed)
        return self._table

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v:.4g}" for k, v in self.metrics.items()
                          if v is not None and not k.startswith("confusion_"))
        return f"EvaluationResult(n={self.summary['n_examples']}, run_id={self.run_id!r}, {shown})"


def _tracker(cfg: RunConfig) -> Tracker | None:
    return Tracker(cfg.tracking_uri, cfg.artifact_root) if cfg.tracking.enabled else None


def evaluate(cfg: RunConfig, steps: Steps = PLAIN, *, dataset: Dataset | None = None, baseline: pd.DataFrame | None = None,
             run_id: str | None = None, tags: dict[str, str] | None = None, resume: str | None = None,
             preflight: bool = True, keep_journal: bool = True, answers_from: str | None = None, lane: Any = None
             ) -> EvaluationResult:
    """Evaluate one configuration: the steps in order, in one MLflow run (unless tracking is off). The
    agent and judge are built and the data loaded before the run opens (a bad target or a bad dataset is
    a user error, not a failed run); from the run's opening on, anything that raises marks it FAILED
    (KILLED on Ctrl+C/SIGTERM). ``dataset`` and ``baseline`` (the baseline run's table) are what
    :mod:`ragmem.run.prepare` loaded once; ``run_id`` adopts a run made before (sweep children).

    ``resume`` (a run id, or the ``untracked-...`` key of an untracked run) continues an interrupted
    run: the same MLflow run, the agent called only for examples its journal has no output for,
    judgements and LLM metric results served by the judge cache. Whatever stops a run, the exception
    carries ``ragmem_progress`` = ``(run key, outputs journaled, examples)`` for the resume hint.
    ``preflight`` checks every configured endpoint first (:mod:`ragmem.clients.endpoints`).
    ``keep_journal=False`` removes the run's journal folder once the run has ended well (one that
    stopped keeps it, for its resume). ``answers_from`` (a journal key) takes the agent's answers from
    another run's journal (a judge-only sibling, :mod:`ragmem.run.judge_sweep`); ``lane`` drives its
    batches in a racing sweep (:class:`ragmem.run.racing.Lane`).
    """
    with windows.released(cfg):  # (data.traces.incremental: the window's claim, given back however this ends)
        components = pipeline.build_components(cfg)  # a bad agent or judge setting fails here, before any call
        dataset = steps.load(cfg, dataset)
        space.reset()  # no write has found the disk full yet (on a sweep's child thread: kept from the sweep's start)
        if preflight:
            endpoints.preflight(endpoints.configured(cfg), log=log.info)
        tracker = _tracker(cfg)  # a resume: the same MLflow run (none when untracked), the outputs its journal has
        journal, kept, run_id = _resumed(cfg, dataset, tracker, resume) if resume else (None, {}, run_id)
        tags = {**(tags or {}), **windows.tags(cfg)}  # (traces: the window, the watermark's key)
        with tracked_run(tracker, cfg.experiment, cfg.run_name, tags=tags, run_id=run_id) as run:
            windows.holds(cfg, run.id)
            journal = journal or _new_journal(run.id, cfg, dataset, tracker)
            if answers_from:  # the sibling's answers, journaled as this run's own (a resume needs no sibling)
                kept = journal.adopt(answers_from)
            try:
                table, result, outputs, streamed = _scored(cfg, steps, components, dataset, journal, kept, lane)
                notes, replied = summaries.endpoint_notes(components)
                result.notes.extend(notes)
                sheet_rows = table if streamed is None else streamed.label_rows
                result.notes.extend(labels.label_sheet(sheet_rows, cfg.judge.label_sample, cfg.seed, journal.folder, run.id))
                params = summaries.run_params(cfg, dataset, components)
                summary = summaries.summary(run.id, cfg, result, table, params, streamed.counts if streamed else None,
                                            streamed.coverage if streamed else None)
                summary.update({"replied_models": replied} if replied else {})
                whole = table if streamed is None else files.ParquetTable(streamed.table_path)
                _windows(cfg, summary, whole, run.id)  # traces: the window, against the last one and across all
                # the gates: judged here, acted on by the caller (exit 3) once the run is logged
                summary.update(gates.judged(cfg, whole, params, result.values, baseline, summary.get("traces")))
                if run.id is not None:
                    _log_run(steps, run, cfg, dataset, outputs, table, result, params, summary, journal, streamed)
            except BaseException as exc:  # what is done, and how to go on, for the one-line message
                stopped = resumes.stopped(exc, journal, len(kept), len(dataset), cfg)
                if stopped is exc:
                    raise
                raise stopped from exc  # a full disk: one line naming the path, exit 3
            journal.close()
        return _handed_over(EvaluationResult(result.values, None if streamed else table, summary, run.id, params,
                                             components.index_builds(), journal.key), journal, streamed, keep_journal)


def _windows(cfg: RunConfig, summary: dict[str, Any], table: Any, run_id: str | None) -> None:
    windows.summarize(cfg, summary, table, run_id)  # the window, and against the last one
    drift.summarize(cfg, summary, table, run_id)  # across the windows so far, and the window's volume


def _handed_over(out: EvaluationResult, journal: Journal, streamed, keep_journal: bool) -> EvaluationResult:
    """The result, the run's journal folder removed unless kept; a streamed run's table stays a
    file: the folder's, or (folder removed) a temporary one that goes with the result."""
    if streamed is not None:
        out.table_path = streamed.table_path
        if not keep_journal:
            out.table_path = Path(tempfile.mkdtemp(prefix="ragmem-table-")) / batching.TABLE
            shutil.move(streamed.table_path, out.table_path)
            weakref.finalize(out, shutil.rmtree, out.table_path.parent, True)
    if not keep_journal:
        shutil.rmtree(journal.folder, ignore_errors=True)
    return out


def _scored(cfg: RunConfig, steps: Steps, components: pipeline.Components, dataset: Dataset, journal: Journal,
            kept: dict[str, AgentOutput], lane: Any = None) -> tuple[pd.DataFrame, Any, list, batching.Streamed | None]:
    """Every example answered, judged and scored: the table (a streamed run's: the rows its report
    may show), the result, the outputs (a streamed run's: the first ``tracking.max_traces``)."""
    decider = lane or Decider.of(cfg, len(dataset), dataset.streamed)  # (a race; gates.stop_when_decided)
    if dataset.streamed:  # chunk by chunk: answered, judged, scored, written (ragmem.run.batching)
        streamed = batching.score_in_chunks(cfg, steps, components, dataset, journal, kept)
        return streamed.shown, streamed.result, streamed.outputs, streamed
    outputs, judgements = batching.answer_and_judge_all(cfg, steps, components, dataset, journal, kept, decider)
    with progress.stage("metrics"):
        table, result = steps.score(dataset.examples[:len(outputs)], outputs, judgements, components, cfg)
    return table, Decider.said(decider, result), outputs, None


def _resumed(cfg: RunConfig, dataset: Dataset, tracker: Tracker | None, resume: str
             ) -> tuple[Journal, dict, str | None]:
    """The journal of the run ``resume`` continues (checked against these settings and data), its
    MLflow run reopened, the outputs it already has (a failed call is not an answer: called again),
    and the run id it continues (none when untracked)."""
    journal = resumes.check_resume(cfg, dataset, resume)
    if tracker is not None:
        tracker.reopen(resume)
    ids = dataset.ids()
    kept = {k: v for k, v in journal.outputs().items() if k in ids and v.error is None}
    log.info("resuming %s: %d of %d examples already answered", resume, len(kept), len(dataset))
    return journal, kept, resume if tracker is not None else None


def _new_journal(run_id: str | None, cfg: RunConfig, dataset: Dataset, tracker: Tracker | None) -> Journal:
    journal = Journal(run_id)
    journal.write_meta({"config": resumes.compared_config(cfg), "data.sha256": dataset.sha256,
                        "experiment": cfg.experiment, "tracking_uri": scrub(cfg.tracking_uri) if tracker else None})
    return journal


def _log_run(steps: Steps, run: TrackedRun, cfg: RunConfig, dataset: Dataset, outputs, table, result, params,
             summary, journal: Journal, streamed: batching.Streamed | None = None) -> None:
    """The run's params, metrics, artifacts, report and traces to MLflow; a store that went away
    keeps the results local (summary written, the resume hint raised). A streamed run logs its
    Parquet file as it is, and its report from the rows it kept."""
    # held: the table itself; streamed: its Parquet file, and its report from the rows it kept
    log_table, examples = (table, dataset.examples) if streamed is None else (streamed.table_path, streamed.examples)
    report = report_html.run_page(summary, table, *(() if streamed is None else (streamed.latency_s, streamed.by_file)))
    try:
        with progress.stage("logging to MLflow"):
            steps.log(run, resolved_config=mask(cfg.raw), params=params, metrics=result.values,
                      counts=summary["counts"], table=log_table, summary=summary, examples=examples, outputs=outputs,
                      max_traces=cfg.tracking.max_traces,
                      extra_files=tuple(p for p in (journal.path, journal.folder / labels.SHEET) if p.is_file()),
                      copies_max_rows=cfg.tracking.table_copies_max_rows,
                      write_back=traffic.write_back(cfg), report=report)
    except Exception as exc:
        if not is_transient(exc):
            raise
        raise resumes.results_kept_local(cfg, journal, summary, exc) from None


# ---- sweeps -------------------------------------------------------------------------------------

def _evaluate_child(cfg: RunConfig, run_id: str | None, dataset: Dataset, resume: bool = False,
                    answers_from: str | None = None, lane: Any = None) -> dict[str, Any]:
    again = resume and run_id is not None and Journal.has_meta(run_id)  # it had started: continue it
    if resume and run_id is not None and not again:  # created but never started: start it now
        _tracker(cfg).reopen(run_id)  # type: ignore[union-attr]  # (a run id: tracked)
    with racing.lane_of(lane):  # (a race: the lane leaves it however the child ends)
        result = evaluate(cfg, PLAIN, dataset=dataset, run_id=None if again else run_id, preflight=False,  # checked
                          resume=run_id if again else None, answers_from=None if again else answers_from, lane=lane)
    table = result._table if result._table is not None else \
        files.ParquetTable(result.table_path, keep=result)  # type: ignore[arg-type]  # (streamed: read in chunks)
    return {"metrics": {k: v for k, v in result.metrics.items() if v is not None}, "table": table,
            "index_builds": result.index_builds, "ci": result.summary.get("ci", {}), "journal": result.journal_key}


def sweep(config: dict[str, Any] | RunConfig, steps: Steps = PLAIN, *, plan: SweepPlan | None = None,
          tags: dict[str, str] | None = None, preflight: bool = True, resume: str | None = None) -> dict[str, Any]:
    """Evaluate every configuration of ``sweep.grid`` (see :mod:`ragmem.run.sweep`) and pick the best;
    ``plan`` is the sweep :mod:`ragmem.run.prepare` made ready (every point valid, each distinct data
    setting loaded once), made here when not given (:func:`ragmem.run.prepare.sweep_plan`).
    ``preflight`` checks every configuration's endpoints first. ``resume`` (a parent run id) continues an
    interrupted sweep: finished children read back from MLflow, the others resumed (or started)."""
    cfg = config if isinstance(config, RunConfig) else RunConfig.from_dict(config)
    plan = plan or prepare.sweep_plan(cfg)
    if plan.spec.method == "tpe":  # Optuna proposes the configurations (ragmem.run.tuning)
        from ragmem.run import tuning  # (Optuna's import, 0.3 s: paid only by a tpe sweep)
        return tuning.tune(cfg, steps, plan, child=_evaluate_child, tracker=_tracker(cfg), tags=tags,
                           preflight=preflight, resume=resume)
    spec, points = plan.spec, plan.points
    firsts = {tuple(child.files): child for child in reversed(plan.configs)}  # one load per distinct data setting
    datasets = {key: steps.load(child, plan.datasets[key]) for key, child in reversed(firsts.items())}
    racer = racing.racer_for(plan, datasets, cfg.seed, resume)  # (sweep.method race: the examples in its order)
    if preflight:
        endpoints.preflight(list(dict.fromkeys(e for c in plan.configs for e in endpoints.configured(c))), log=log.info)
    tracker = _tracker(cfg)
    shas = sorted({d.sha256 for d in datasets.values()})
    meta = {"config": resumes.compared_config(cfg), "data.sha256": ";".join(shas), "experiment": cfg.experiment}
    existing = resumes.reopen_sweep(tracker, resume, meta, len(points)) if resume else {}
    interrupts.STOP.clear()
    space.reset()
    with tracked_run(tracker, cfg.experiment, cfg.run_name or f"sweep-{uuid.uuid4().hex[:6]}", run_id=resume,
                     tags={"ragmem.entry": "sweep", **(tags or {})}) as parent:
        if parent.id is not None and not resume:
            Journal.write_meta_for(parent.id, meta)
        steps.log_results(parent, params={"sweep.grid": spec.grid, "sweep.samples": spec.samples,
                                          "sweep.objective": f"{spec.goal} {spec.metric}",
                                          "sweep.constraints": list(spec.constraints), "n_children": len(points),
                                          "data.sha256": shas[0] if len(shas) == 1 else "varies"})
        found = [existing.get(resumes.point_key(p)) for p in points]
        child_ids = [f[0] if f else tracker.create_run(cfg.experiment, sweeps.child_name(p), parent_run_id=parent.id,
                                                       tags={"ragmem.entry": "sweep-child",
                                                             "ragmem.run.sweep.point": resumes.point_key(p)})
                     if tracker else None for p, f in zip(points, found)]
        todo = [i for i, f in enumerate(found) if not (f and f[1] == "FINISHED")]
        log.info("sweep: %d configurations, %d at a time%s", len(points), spec.max_parallel,
                 f" ({len(points) - len(todo)} finished before, kept)" if resume else "")
        outcomes = _run_children(steps, plan, datasets, child_ids, todo, tracker, cfg, parent.id, resume, racer)
        children, tables, index_builds = _sweep_children(plan, child_ids, outcomes, tracker)
        racing.recorded(racer, children, child_ids, tracker)
        top = sweeps.pick_best(children, spec)
        if top is not None:  # compared with the top one; the choice among those tied with it: tie_break
            sweeps.mark_against_best(children, tables, children.index(top), spec, cfg)
        best = sweeps.choose(children, spec)
        summary = sweeps.summary(parent.id, cfg, spec, children, best, index_builds, plan.base) | racing.summary_of(racer)
        judges = judge_sweep.agreement(children, tables, spec, cfg)  # the grid varies the judge: do they agree?
        if judges is not None:
            summary["judges"] = judges
        steps.log_results(parent, **sweeps.parent_record(children, best, spec, cfg, summary))
    return summary


def _run_children(steps: Steps, plan: SweepPlan, datasets: dict, child_ids: list, todo: list[int],
                  tracker: Tracker | None, cfg: RunConfig, parent_id: str | None, resume: str | None,
                  racer: racing.Racer | None = None) -> dict:
    """The unfinished children, ``sweep.max_parallel`` at a time: index -> ``("ok", result)`` or
    ``("failed", reason)``. Those that differ from a sibling only in judge settings run after it, on
    its agent's answers (:func:`ragmem.run.judge_sweep.answer_sources`). Interrupted, the children still
    running end with the parent."""
    sources = judge_sweep.answer_sources(plan.points) if judge_sweep.varies_judge(plan.points) and not racer else {}
    waves = [[i for i in todo if i not in sources], [i for i in todo if i in sources]]
    names = {sweeps.Announced.key(plan.configs[i], child_ids[i]): sweeps.child_name(plan.points[i]) for i in todo}
    try:
        with progress.stage("sweep", len(todo), unit="configurations") as overall, progress.fold(overall), \
                racing.spending(racer):  # (a race: every judge request counted, none past sweep.budget)
            announced = sweeps.Announced(_evaluate_child, overall, names, plan.spec.metric, log.info)
            ran: dict[int, Any] = {}
            for wave in waves:
                items = [(plan.configs[i], child_ids[i], datasets[tuple(plan.configs[i].files)], bool(resume),
                          _answers_of(sources.get(i), ran, child_ids), racer.lane(i) if racer else None) for i in wave]
                at_once = len(items) if racer else plan.spec.max_parallel  # (a race: all start, max_parallel work)
                ran.update(zip(wave, steps.children(announced, items, at_once) if items else []))
    except BaseException as exc:
        interrupts.STOP.set()  # children on other threads wind down (their runs end KILLED)
        end_unfinished(tracker, child_ids, "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED",
                       f"sweep ended: {failure_message(exc)}")
        finished = sum(tracker.client.get_run(c).info.status == "FINISHED" for c in child_ids) if tracker else 0
        exc.ragmem_progress = (None, finished, len(plan.points), racing.NOT_RESUMED) if racer else (  # type: ignore[attr-defined]
            parent_id, finished, len(plan.points), "configurations done")
        raise
    return ran


def _answers_of(source: int | None, ran: dict, child_ids: list) -> str | None:
    """The journal a judge-only sibling takes its answers from; ``None`` (the agent is called) when its source failed."""
    if source is None:
        return None
    if source in ran:
        status, value = ran[source]
        return value.get("journal") if status == "ok" else None
    return child_ids[source] if child_ids[source] and Journal.has_meta(child_ids[source]) else None


def _sweep_children(plan: SweepPlan, child_ids: list, outcomes: dict, tracker: Tracker | None):
    """Every child's record (its metrics, or its failure), its per-example table, and the index builds."""
    children, tables, index_builds = [], {}, 0
    for i, point in enumerate(plan.points):
        status, value = outcomes.get(i) or ("ok", resumes.finished_child(tracker, child_ids[i]))
        child = {"run_id": child_ids[i], "params": point, "metrics": {}, "status": "FINISHED", "error": None}
        if status == "ok":
            child["metrics"], tables[i] = value["metrics"], value["table"]
            child["ci"] = value.get("ci", {})
            index_builds += value["index_builds"]
        else:
            child.update(status="FAILED", error=value)
            end_unfinished(tracker, child_ids[i:i + 1], "FAILED", str(value))  # its task died before opening the run
        children.append(child)
    return children, tables, index_builds


# ---- the memory benchmark -----------------------------------------------------------------------

def bench_memory(config: dict[str, Any] | RunConfig, steps: Steps = PLAIN, *, conversations: list | None = None,
                 tags: dict[str, str] | None = None, preflight: bool = True) -> dict[str, Any]:
    """Memory layers compared on ``bench.dataset`` (LoCoMo or LongMemEval; see :mod:`ragmem.memory.benchmark`);
    ``conversations`` are those :mod:`ragmem.run.prepare` read (read now when not given); ``preflight``
    checks the judge, generator, embeddings and HTTP layers first."""
    cfg = prepare.bench_defaults(config if isinstance(config, RunConfig) else RunConfig.from_dict(config))
    bench, data = cfg.bench, bench_data.dataset(cfg.bench.dataset)
    specs = memory_layers.method_specs(bench.methods)
    pool = steps.load_conversations(str(bench.data), conversations, data.name)
    selected = data.select(pool, bench.limit_conversations, bench.limit_questions)
    conversations = [c for c in pool if c.id in selected]
    n_questions = sum(len(q) for q in selected.values())
    log.info("bench-memory: %s, %d conversations, %d questions, %d methods", data.title, len(conversations), n_questions, len(specs))
    kit = memory_bench.BenchKit.build(cfg)
    if preflight:
        endpoints.preflight(endpoints.configured(cfg), log=log.info)
    common = {"bench.dataset": data.name, "bench.data": str(bench.data), "bench.top_k": str(bench.top_k),
              "bench.categories": json.dumps(data.mapping()),
              "n_conversations": str(len(conversations)), "n_questions": str(n_questions),
              "bench.limit_questions": str(bench.limit_questions), "generator.type": cfg.generator.type,
              "judge.signature": kit.judge.signature(), "generation.signature": kit.scorer.signature()}
    categories = sorted({q.category for qs in selected.values() for q in qs})
    manifest = bench_compare.manifest(cfg, specs, kit.judge.signature(), data.digest(bench.data),
                                      f"{PROMPT_VERSION}#{prompt_hash()}")  # what --rerun runs again
    tracker = _tracker(cfg)
    results: dict[str, dict[str, Any]] = {}
    methods = []
    with tracked_run(tracker, cfg.experiment, cfg.run_name or "bench-memory",
                     tags={"ragmem.entry": "bench-memory", **(tags or {})}) as parent:
        steps.log_results(parent, params={**common, "bench.methods": [s.name for s in specs],
                                          "bench.data_sha256": manifest["data"]["sha256"]},
                          json_files={"manifest.json": manifest})
        for spec in specs:
            outcome = _bench_method(spec, conversations, selected, kit, cfg, steps, tracker, parent.id, common)
            results[str(spec.name)] = {**outcome["metrics"], "status": outcome["status"]}  # (named by method_specs)
            methods.append(outcome)
        table = memory_bench.results_table(results, categories, data)
        rows = {o["method"]: o.pop("rows", None) for o in methods}  # (per question: not in the result)
        baseline = bench.baseline or str(specs[0].name)  # every layer against it, question by question
        finished, stats = {m: r for m, r in rows.items() if results[m]["status"] == "FINISHED"}, cfg.stats
        paired = bench_compare.paired_layers(finished, baseline, categories, stats.resamples, cfg.seed, stats.confidence, data)
        scopes = bench_compare.per_category(finished, categories, stats.resamples, cfg.seed, stats.confidence, data)
        steps.log_results(parent, tables={data.results: pd.DataFrame(table), f"{data.name}_scopes": pd.DataFrame(scopes)},
                          json_files={"paired.json": paired}, figures=bench_figures.figures(table, scopes))
    return {"parent_run_id": parent.id, "experiment": cfg.experiment, "n_conversations": len(conversations),
            "tracking_uri": summaries.store_location(cfg.tracking_uri) if parent.id else None,
            "dataset": data.name, "n_questions": n_questions, "categories": {c: data.categories[c] for c in categories},
            "category_source": data.source, "methods": methods, "results_table": table, "baseline": baseline,
            "paired": paired, "per_category": scopes, "manifest": manifest}


def _bench_method(spec, conversations, selected, kit, cfg: RunConfig, steps: Steps, tracker, parent_id,
                  common: dict[str, str]) -> dict[str, Any]:
    """One memory layer of a benchmark in its own child run. Its failures are contained: a failing
    ``add``/``reset``/``search`` is recorded and counted (:func:`ragmem.memory.benchmark.run_conversation`),
    and a layer that cannot be built, or answers no question at all, ends as a FAILED child run
    with its reason while the other methods go on."""
    bench = cfg.bench
    outcome: dict[str, Any] = {"method": spec.name, "run_id": None, "status": "FAILED", "metrics": {}, "flags": {}}
    before, layer = kit.usage(), None
    try:
        with tracked_run(tracker, cfg.experiment, spec.name, parent_run_id=parent_id,
                         tags={"ragmem.entry": "bench-memory-method", "bench.method": spec.name}) as child:
            outcome["run_id"] = child.id
            layer = kit.layer(spec, bench.full_context_tokens, cfg.import_paths)
            answered, ingested = [], memory_bench.Ingested()
            for conversation in conversations:
                with progress.stage(f"bench-memory: {spec.name}: conversation {conversation.id}"):
                    done, got = steps.memory_conversation(spec.name, layer, conversation, selected[conversation.id],
                                                          bench.top_k, kit.generate, bench.dataset)
                answered += done
                for name in ("add_times", "add_errors", "reset_errors", "add_sizes"):
                    getattr(ingested, name).extend(getattr(got, name))
                ingested.paths.update(got.paths)
                lost = got.add_errors + got.reset_errors
                log.info("bench-memory: %s: conversation %s done (%d questions%s)", spec.name, conversation.id,
                         len(done), f"; {plural(len(lost), 'add/reset failure')}, first: {lost[0]}" if lost else "")
            verdicts = steps.judge_answers(spec.name, kit.judge, answered, bench.dataset)
            rows, metrics = memory_bench.score(answered, ingested, kit.scorer, verdicts, kit.count_tokens,
                                               bench_data.dataset(bench.dataset), kit.keywords)
            metrics.update(kit.usage_since(before, layer))
            outcome["metrics"], outcome["rows"], outcome["flags"] = metrics, rows, memory_bench.flags(metrics)
            steps.log_results(child, metrics=metrics, tables={"questions": pd.DataFrame(rows)}, tags=outcome["flags"],
                              params={**common, "bench.method": spec.name, "bench.method_type": spec.type,
                                      "bench.method_spec": spec.model_dump(exclude={"params"}, exclude_none=True)})
            reason = memory_bench.failure(answered, ingested)
            if reason:
                raise memory_bench.MethodFailed(reason)
        outcome["status"] = "FINISHED"
    except Exception as exc:  # (an interrupt is not contained: it stops the benchmark)
        outcome["error"] = failure_message(exc)
        log.warning("bench-memory: %s FAILED: %s", spec.name, outcome["error"])
    finally:
        close = getattr(layer, "close", None)
        if callable(close):  # an mcp layer's server is stopped
            close()
    return outcome
