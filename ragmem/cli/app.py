"""The ``ragmem`` command line. Every user mistake ends as one ``error: ...`` line and exit code 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, List, Optional

import typer
import typer.core

from ragmem.cli.common import flags_untyped, in_config_home, log, run_prepared, setup_logging, store_client, store_uri
from ragmem.cli.common import writable, write
from ragmem.cli.scheduling import pick_flow, schedule_for, serve_flow
from ragmem.cli.generating import generate
from ragmem.cli.services import alerts_app, data_app, init, labels_app, report, server_app, trigger, ui, unserve, validate
from ragmem.clients import endpoints
from ragmem.config.loading import data_path
from ragmem.data.hashing import file_sha256
from ragmem.errors import RagmemError, RunFailed, Stopped
from ragmem.exits import check_environment, finish as finish_command, leave, prepare_environment
from ragmem.judges import llm_client, pairwise, require_llm
from ragmem.memory import bench_compare
from ragmem.memory.bench_data import DATASETS, SUITES
from ragmem.orchestration.server import resolve_api_url
from ragmem.report.listing import print_runs
from ragmem.report.bench_scopes import print_scopes
from ragmem.report.terminal import (out, plural, print_bench, print_paired, print_pairwise, print_rerun, print_stored,
                                    print_stored_parent, print_summary, print_sweep, say)
from ragmem.run import drift, dryrun, gates, prepare, windows
from ragmem.run.summary import nothing_measured
from ragmem.tracking import record_pairwise, Tracker
from ragmem.tracking.compare import latest_experiment, list_runs, paired_comparison, sweep_children
from ragmem.tracking.runs import artifact_json, bench_rows, load_run_table, resolve_run_id
from ragmem.version import __version__


class _Commands(typer.core.TyperGroup):
    """The command group. Typer turns a ``KeyboardInterrupt`` into ``Exit(130)``, which in this
    non-standalone use comes back as a plain 130: no line, and SIGTERM's 143 lost. A Ctrl+C or
    SIGTERM during a command (its arguments' parsing included) leaves here as :class:`Stopped`,
    which typer passes on to :func:`main`'s one line and code."""

    def make_context(self, info_name, args, parent=None, **extra):
        flags_untyped(self)  # (before --help, the group's or a command's, is shown)
        return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise Stopped(exc) from None


app = typer.Typer(cls=_Commands, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Evaluate RAG systems and agent memory layers; every run is tracked in MLflow.")


@app.command()
def run(
    config: Path = typer.Argument(..., help="YAML config (see configs/default.yaml)."),
    data: Optional[str] = typer.Option(None, "--data", help="Dataset file; replaces data.files."),
    set_: List[str] = typer.Option([], "--set", help="Override a setting: dotted.key=value (repeatable)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o",
                                          help="Where to write the summary JSON (default: summary.json)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's own logs too."),
    show_all: bool = typer.Option(False, "--all", help="Print every metric, not only the headline ones."),
    resume: Optional[str] = typer.Option(None, "--resume", metavar="RUN_ID",
                                         help="Continue an interrupted, failed or killed run (same config)."),
    no_preflight: bool = typer.Option(False, "--no-preflight", help="Skip checking every endpoint before the first call."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate, check the endpoints and print the LLM and "
                                 "embedding requests, cached share and cost the run would have; send nothing."),
    fail_under: List[str] = typer.Option([], "--fail-under", metavar="METRIC=VALUE",
                                         help="Exit 3 when METRIC is below VALUE (repeatable; adds to gates)."),
    fail_over: List[str] = typer.Option([], "--fail-over", metavar="METRIC=VALUE",
                                        help="Exit 3 when METRIC is above VALUE (repeatable; adds to gates)."),
    baseline: Optional[str] = typer.Option(None, "--baseline", metavar="RUN_ID",
                                           help="Run (id or unique prefix) that --max-regression compares with."),
    max_regression: List[str] = typer.Option([], "--max-regression", metavar="METRIC=DELTA",
                                             help="Exit 3 when METRIC is significantly worse than the baseline "
                                                  "by more than DELTA (paired test; repeatable)."),
    stop_when_decided: bool = typer.Option(False, "--stop-when-decided", help="Stop judging once every gate is decided."),
) -> None:
    """Run the evaluation flow: load -> time the agent -> judge -> metrics -> MLflow."""
    setup_logging(verbose)
    if output is not None or not dry_run:
        output = writable(output or Path("summary.json"))
    extra: dict[str, Any] = {"gates": {**gates.from_options(fail_under, fail_over, max_regression),
                                       **({"stop_when_decided": True} if stop_when_decided else {})}}
    if baseline:
        extra["baseline"] = baseline
    in_config_home(config)
    ready = prepare.for_run(prepare.resolve(config, overrides=set_, data=data, extra=extra), resume=resume,
                            claim=not dry_run)
    if dry_run:  # nothing is tracked, no Prefect flow: a plan, printed (and written with --output)
        plan = dryrun.dry_run(ready.config, str(config), dataset=ready.dataset, resume=ready.resume,
                              preflight=not no_preflight)
        for line in dryrun.render(plan):
            out.print(line, highlight=False, markup=False)
        if output is not None:
            write(output, plan.as_dict(), "dry run")
        return

    def finish(summary: dict[str, Any]) -> None:
        print_summary(summary, show_all, stored=False)
        write(output, summary, "summary")
        failed = [g for g in summary.get("gates", []) if not g["passed"]]
        if summary.get("gates") and not failed:
            out.print(f"gates: all {len(summary['gates'])} passed")
            for line in filter(None, map(gates.passed_line, summary["gates"])):
                out.print(f"  {line}")
        for line in drift.undetectable_lines(ready.config, (summary.get("traces") or {}).get("volume") or {}):
            out.print(f"note: {line}", highlight=False, markup=False)
        previous = (summary.get("traces") or {}).get("previous")
        if previous:  # a window of traffic against the last one: two samples of different traces
            how = f"paired: the same {previous['paired']} traces" if previous.get("paired") else "unpaired"
            out.print(f"against the previous window {previous['run_id'][:8]} ({how}):")
            for row in previous["rows"]:
                out.print(f"  {windows.line(row)}", highlight=False, markup=False)
        print_stored(summary)  # the last line: where the run is and how to see it
        nothing = nothing_measured(summary)
        if nothing:  # stored, but nothing in it can be trusted: one line, exit 3 (a scheduled job sees it)
            raise RunFailed(nothing)
        if failed:  # the run is complete and logged: now the verdict, one line per failed gate, exit 3
            raise gates.GateFailed([gates.GateResult(**g) for g in failed])

    if not no_preflight:  # every endpoint asked before the Prefect server is started (a dead one costs no server)
        endpoints.preflight(endpoints.configured(ready.config), log=log.info)
    try:
        run_prepared("ragmem.flows.evaluate:run_evaluate", ready, verbose, finish, resume=ready.resume,
                 preflight=False)
    except RagmemError as exc:  # the tracking store went away after the work: the summary is still written
        if summary := getattr(exc, "ragmem_summary", None):
            write(output, summary, "summary")
        raise


@app.command()
def sweep(
    config: Path = typer.Argument(..., help="YAML config with a sweep section (see configs/sweep_retriever.yaml)."),
    data: Optional[str] = typer.Option(None, "--data", help="Dataset file; replaces data.files."),
    set_: List[str] = typer.Option([], "--set", help="Override a setting: dotted.key=value (repeatable)."),
    output: Path = typer.Option(Path("sweep.json"), "--output", "-o", help="Where to write the sweep JSON."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's own logs too."),
    resume: Optional[str] = typer.Option(None, "--resume", metavar="PARENT_RUN_ID",
                                         help="Continue an interrupted sweep: rerun only its unfinished configurations."),
    no_preflight: bool = typer.Option(False, "--no-preflight", help="Skip checking every endpoint before the first call."),
) -> None:
    """Evaluate every configuration of a grid: one MLflow parent run, one child run each."""
    setup_logging(verbose)
    writable(output)
    in_config_home(config)
    ready = prepare.for_sweep(prepare.resolve(config, overrides=set_, data=data), resume=resume)
    plan = ready.planned
    spec = plan.spec

    def finish(result: dict[str, Any]) -> None:
        print_sweep(result, spec)
        write(output, result, "sweep")
        print_stored_parent(result)
        if result["children"] and all(c["status"] != "FINISHED" for c in result["children"]):
            raise RagmemError(f"sweep: every one of the {len(result['children'])} configurations failed "
                              f"(first: {result['children'][0]['error']}); see {output}")

    if not no_preflight:  # every grid point's endpoints asked before the Prefect server is started
        endpoints.preflight(list(dict.fromkeys(e for c in plan.configs for e in endpoints.configured(c))),
                            log=log.info)
    run_prepared("ragmem.flows.sweep:run_sweep", ready, verbose, finish, preflight=False, resume=ready.resume)


@app.command()
def compare(
    runs: List[str] = typer.Argument(None, help="RUN_A RUN_B for a paired comparison; none for a table of runs."),
    experiment: Optional[str] = typer.Option(None, "--experiment", "-e", help="Experiment whose runs to list (default: the latest run's)."),
    metric: Optional[str] = typer.Option(None, "--metric", "-m", help="Metric to sort by (best first; default: the first "
                                         "headline metric the runs have: pass_rate, else reference_coverage, ..., "
                                         "else faithfulness)."),
    last: int = typer.Option(20, "--last", "-n", help="How many of the latest runs to list."),
    sweep: Optional[str] = typer.Option(None, "--sweep", metavar="PARENT_RUN_ID",
                                        help="List a sweep's children, ranked as the sweep decided."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also write the comparison as JSON."),
    tracking_uri: Optional[str] = typer.Option(None, "--tracking-uri", help="Default: MLFLOW_TRACKING_URI or sqlite:///mlruns/mlflow.db."),
    metrics: List[str] = typer.Option([], "--metrics", help="Paired mode: only these metrics (repeatable)."),
    resamples: int = typer.Option(1000, "--resamples", help="Paired mode: bootstrap/randomization resamples."),
    seed: int = typer.Option(0, "--seed", help="Paired mode: random seed."),
    judge: str = typer.Option("metrics", "--judge", help="Paired mode: metrics (each metric, B - A) or pairwise "
                                                           "(an LLM judge sees both answers, in both orders)."),
    rubric: Optional[str] = typer.Option(None, "--rubric", help="Pairwise: judge by this rubric of the config "
                                                                 "(default: which answer better answers the query)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Pairwise: config whose judge (and rubrics) "
                                                                        "to use."),
    set_: List[str] = typer.Option([], "--set", help="Pairwise: override a setting, e.g. judge.model=NAME (repeatable)."),
) -> None:
    """Compare runs: the latest runs of an experiment sorted by a metric, or two runs example by example
    (every metric, or an LLM judge's preference between their answers)."""
    if runs and len(runs) != 2:  # the arguments first: a mistake costs no store
        raise RagmemError(f"compare: give two run ids (RUN_A RUN_B) or none, got {len(runs)}")
    if metrics and not runs:
        raise RagmemError("compare: --metrics goes with two run ids (RUN_A RUN_B); the table of runs takes --metric")
    if resamples < 1:
        raise RagmemError(f"--resamples: expected a positive integer, got {resamples}")
    if last < 1:
        raise RagmemError(f"--last: expected a positive integer, got {last}")
    if judge not in ("metrics", "pairwise"):
        raise RagmemError(f"--judge: expected metrics or pairwise, got {judge!r}")
    if judge == "metrics" and (rubric or config or set_):
        raise RagmemError("compare: --rubric, --config and --set go with --judge pairwise")
    if judge == "pairwise" and not runs:
        raise RagmemError("compare --judge pairwise: give two run ids (RUN_A RUN_B)")
    if output is not None:
        output = writable(output)
    if judge == "pairwise":
        setup_logging(False)  # (the judge's progress lines, every 10 s of a long comparison)
        result = pairwise_command(runs, config, set_, rubric, tracking_uri, resamples, seed)
        print_pairwise(result)
        say(f"MLflow pairwise run {result['pairwise_run_id']}")
        if output:
            write(output, result, "pairwise comparison")
        return

    client = store_client(tracking_uri)
    if runs:
        result = paired_comparison(client, runs[0], runs[1], list(metrics) or None, resamples, seed)
        print_paired(result)
        if output:
            write(output, result, "comparison")
        return
    if sweep:
        table, warnings, notes, objective = sweep_children(client, sweep, last)
        metric, title = objective["metric"], f"sweep {sweep}: {plural(len(table), 'child run')}"
    else:
        experiment = experiment or latest_experiment(client)
        table, warnings, notes = list_runs(client, experiment, metric, last)
        metric = table.attrs["sorted_by"]
        title = f"{experiment}: {plural(len(table), 'run')}, sorted by {metric}"
    print_runs(table, title, warnings, notes)
    if output:
        write(output, {"experiment": experiment, "sweep": sweep, "metric": metric, "warnings": warnings, "notes": notes,
                       "runs": json.loads(table.to_json(orient="records"))}, "comparison")


@app.command()
def serve(
    config: Path = typer.Argument(..., help="YAML config of the run (or sweep) to schedule."),
    cron: str = typer.Option(..., "--cron", help='Cron schedule, e.g. "0 2 * * *" (02:00 every day).'),
    name: Optional[str] = typer.Option(None, "--name", help="Deployment name (default: the experiment)."),
    flow_kind: str = typer.Option("auto", "--flow", help="evaluate, sweep, or auto (sweep when the config has sweep.grid)."),
    timezone: str = typer.Option("UTC", "--timezone", help="Time zone of the cron schedule."),
    data: Optional[str] = typer.Option(None, "--data", help="Dataset file; replaces data.files."),
    set_: List[str] = typer.Option([], "--set", help="Override a setting: dotted.key=value (repeatable)."),
) -> None:
    """Serve the evaluate (or sweep) flow as a Prefect deployment on a cron schedule (runs until Ctrl+C)."""
    setup_logging(False)
    in_config_home(config)
    cfg = prepare.resolve(config, overrides=set_, data=data)
    prepare.for_run(cfg, claim=False)  # checked now; each scheduled run prepares (and claims) its own window
    resolved = cfg.raw
    schedule_for(cron, timezone)  # --cron, --timezone and --flow checked before the Prefect server starts
    pick_flow(resolved, flow_kind)
    api_url = resolve_api_url(log=log.info, idle_s=cfg.orchestration.server_idle_s)  # (held while it serves)
    serve_flow(resolved, cron=cron, name=name, flow_kind=flow_kind, timezone=timezone, api_url=api_url,
               log=lambda message: out.print(message, markup=False, highlight=False))


@app.command("bench-memory")
def bench_memory(
    config: Optional[Path] = typer.Argument(None, help="YAML config with a bench section (see configs/locomo.yaml, "
                                                        "configs/longmemeval.yaml); none with --rerun."),
    data: Optional[str] = typer.Option(None, "--data", help="The data of bench.dataset: LoCoMo's locomo10.zip, a folder, "
                                                            "a file or locomo10.json; a LongMemEval JSON file."),
    limit_conversations: Optional[int] = typer.Option(None, "--limit-conversations",
                                                      help="Only the first N conversations (LongMemEval: questions)."),
    limit_questions: Optional[int] = typer.Option(None, "--limit-questions", help="N questions of each conversation "
                                                  "(LongMemEval: in all), round-robin across the categories."),
    set_: List[str] = typer.Option([], "--set", help="Override a setting: dotted.key=value (repeatable)."),
    output: Path = typer.Option(Path("summary.json"), "--output", "-o", help="Where to write the summary JSON."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's own logs too."),
    no_preflight: bool = typer.Option(False, "--no-preflight", help="Skip checking every endpoint before the first call."),
    rerun: Optional[str] = typer.Option(None, "--rerun", help="Run a finished benchmark again from its manifest (its "
                                                               "parent run id) and compare each layer with its first run."),
    suite: Optional[str] = typer.Option(None, "--suite", help="A suite of ragmem's own on the config's memory layers "
                                                              "instead of bench.dataset: lifecycle (recall, update, "
                                                              "contradiction, deletion, distractors, sessions apart)."),
) -> None:
    """Benchmark memory layers on LoCoMo, LongMemEval, BEAM or the lifecycle suite: ingest, recall, answer, score;
    baselines beside them."""
    setup_logging(verbose)
    writable(output)
    if (config is None) == (rerun is None):
        raise RagmemError("bench-memory: give a CONFIG, or --rerun PARENT_RUN_ID (the manifest holds the config)")
    first = None
    if rerun is not None:
        if data or limit_conversations or limit_questions or set_:
            raise RagmemError("bench-memory --rerun: runs the manifest as it is; --data, --limit-* and --set do not apply")
        first, manifest = rerun_manifest(rerun)
    extra: dict[str, Any] = {}
    for key, value in (("limit_conversations", limit_conversations), ("limit_questions", limit_questions)):
        if value is not None:
            if value < 1:
                raise RagmemError(f"--{key.replace('_', '-')}: expected a positive integer, got {value!r}")
            extra[key] = value
    if suite is not None:
        if suite not in SUITES:
            raise RagmemError(f"--suite: expected one of {', '.join(SUITES)}, got {suite!r}")
        extra.update(dataset=suite, data="")  # (generated with the run's seed: ragmem.memory.lifecycle)
    if data:
        extra["data"] = data_path(data, Path.cwd(), "--data")
    if first is not None:
        ready = prepare.for_bench(prepare.resolve(None, extra=manifest["config"]))
    else:
        in_config_home(config)
        ready = prepare.for_bench(prepare.resolve(config, overrides=set_, extra={"bench": extra} if extra else None))

    def finish(result: dict[str, Any]) -> None:
        print_bench(result, scopes=print_scopes)
        if first is not None:
            result["rerun_of"], result["rerun"] = first, rerun_against(first, result)
            print_rerun(result["rerun"], first)
        write(output, result, "summary")
        print_stored_parent(result)
        if result["methods"] and all(m["status"] != "FINISHED" for m in result["methods"]):
            raise RagmemError(f"bench-memory: every one of the {len(result['methods'])} methods failed "
                              f"(first: {result['methods'][0]['method']}: {result['methods'][0].get('error')})")

    run_prepared("ragmem.flows.bench_memory:bench_memory_flow", ready, verbose, finish, preflight=not no_preflight)


app.add_typer(server_app, name="server")
app.add_typer(labels_app, name="labels")
app.add_typer(data_app, name="data")
app.add_typer(alerts_app, name="alerts")
for command in (init, report, trigger, unserve, ui, generate, validate):
    app.command()(command)


def _version(value: bool) -> None:
    if value:
        print(f"ragmem {__version__}")
        raise typer.Exit(0)


@app.callback()
def _options(version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                           help="Print the version and exit.")) -> None:
    """Evaluate RAG systems and agent memory layers; every run is tracked in MLflow."""


def check_set_flags(argv: list[str]) -> None:
    """``--set key value`` (a space for the ``=``) would reach click as a stray argument with a bare
    "unexpected extra argument": name the form instead, before anything runs."""
    for flag, value in zip(argv, argv[1:]):
        if flag == "--set" and "=" not in value and not value.startswith("-"):
            raise RagmemError(f"--set {value}: expected dotted.key=value with no space around '=' "
                              f"(e.g. --set judge.threshold=0.5)")


def pairwise_command(runs: list[str], config: Path | None, overrides: list[str], rubric: str | None,
                     tracking_uri: str | None, resamples: int, seed: int) -> dict[str, Any]:
    """``ragmem compare RUN_A RUN_B --judge pairwise``: the judge's settings (and rubrics) from
    ``--config``/``--set`` checked, both runs' tables read and their shared examples counted, the
    judge's endpoint probed, all before any request; then the comparison, logged as a run of its own
    in run A's experiment (:func:`ragmem.tracking.record_pairwise`)."""
    # (only the judge and the rubrics are read: a metric selection that needs more endpoints is not asked for)
    cfg = prepare.resolve(config, overrides=overrides, extra={"metrics": ["pass_rate"]})
    require_llm(cfg.judge, "compare --judge pairwise: needs an LLM judge: judge.type llm and judge.model "
                           "(with judge.base_url), in --config or with --set")
    chosen = None
    if rubric is not None:
        found = {r.name: r for r in cfg.rubric_definitions()}
        if rubric not in found:
            raise RagmemError(f"--rubric {rubric}: not a rubric of the config (rubrics: {', '.join(found) or 'none'})")
        chosen = found[rubric]
    client = store_client(tracking_uri)
    a, b = load_run_table(client, runs[0]), load_run_table(client, runs[1])
    pairwise.pairs_to_judge(a, b)  # nothing to judge: one line, before the probe and any request
    endpoints.preflight([e for e in endpoints.configured(cfg) if e.setting == "judge.base_url"])
    result = pairwise.compare_pairwise(a, b, llm_client(cfg.judge, ""), chosen, resamples, seed)
    experiment = client.get_experiment(a.attrs["run"].info.experiment_id).name
    result["pairwise_run_id"] = record_pairwise(Tracker(store_uri(tracking_uri)), experiment, result)
    return result


def rerun_manifest(run_ref: str) -> tuple[str, dict[str, Any]]:
    """``bench-memory --rerun``: the first run's id and its manifest (``manifest.json`` of its parent
    run, in the store of MLFLOW_TRACKING_URI or the home), the data checked to be the same bytes."""
    client = store_client(None)
    run_id = resolve_run_id(client, run_ref, "--rerun")
    try:
        manifest = artifact_json(client, run_id, "manifest.json")
    except Exception:
        raise RagmemError(f"--rerun {run_ref}: run {run_id} has no manifest.json (not a bench-memory parent run, "
                          "or one logged before manifests)") from None
    data = manifest["data"]
    if not Path(data["path"]).exists() or file_sha256(data["path"]) != data["sha256"]:
        raise RagmemError(f"--rerun {run_ref}: the data {data['path']} is missing or not the bytes the first run "
                          f"read (sha256 {data['sha256'][:12]}...): nothing was run")
    return run_id, manifest


def rerun_against(first: str, result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each layer of the rerun against its first run, question by question (both read back from
    their method runs: :func:`ragmem.tracking.runs.bench_rows`)."""
    client = store_client(None)
    categories = sorted(int(c) for c in result["categories"])
    return bench_compare.rerun_comparison(bench_rows(client, first), bench_rows(client, result["parent_run_id"]),
                                          categories, data=DATASETS[result["dataset"]])


def main(argv: list[str] | None = None) -> None:
    """Entry point: every outcome ends as one line and an exit code (:mod:`ragmem.exits`)."""
    command = argv is None  # the ``ragmem`` command itself, not a caller in Python
    argv = list(sys.argv[1:] if argv is None else argv)
    prepare_environment(argv)
    try:
        check_set_flags(argv)
        check_environment()
        code = app(args=argv, prog_name="ragmem", standalone_mode=False)
        code = code if isinstance(code, int) else 0
        if code == 130:  # typer's own interrupt (Ctrl+C before any command began): still the one line
            code = finish_command(KeyboardInterrupt(), argv)
    except BaseException as exc:  # noqa: BLE001 (every kind is mapped to its line and code)
        code = finish_command(exc, argv)
    if command:
        leave(code)
    sys.exit(code)


if __name__ == "__main__":
    main()
