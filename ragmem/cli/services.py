"""The ``ragmem`` commands around the runs: the local Prefect server (``server start|status|stop``),
the MLflow UI (``ui``), triggering a served deployment (``trigger``) and the HTML report
(``report``). Registered on the one ``ragmem`` command in :mod:`ragmem.cli.app`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from ragmem.cli import starter
from ragmem.config.alert_settings import scheme_of
from ragmem.config.loading import resolve_settings
from ragmem.errors import ConfigError, RunFailed
from ragmem.orchestration import notify
from ragmem.cli.common import log, setup_logging, store_client, store_uri, writable
from ragmem.data import published
from ragmem.data.checking import check_file, questions_only
from ragmem.data.loaders import DataFile
from ragmem.data.readers import check_encoding
from ragmem.metrics import needs
from ragmem.runtime import progress
from ragmem.errors import RagmemError
from ragmem.report import pages as report_pages
from ragmem.run import relabel
from ragmem.run.summary import store_location
from ragmem.runtime import home
from ragmem.orchestration import server as prefect_server
from ragmem.orchestration.server import configured_api_url, ensure_managed_server, healthy, managed_port, stop_managed_server
from ragmem.cli.scheduling import deployments, trigger as start, unserve as remove_deployment
from ragmem.report.terminal import out, plural, print_summary, say
from ragmem.tracking.ui import serve_ui

server_app = typer.Typer(no_args_is_help=True, help="The local Prefect server ragmem manages.")
data_app = typer.Typer(no_args_is_help=True, help="Published datasets: fetched into the home's cache, pinned by sha256.")
labels_app = typer.Typer(no_args_is_help=True, help="Human labels of a run's examples (judge.label_sample).")


@data_app.command("fetch")
def data_fetch(
    name: str = typer.Argument(..., help="The dataset: locomo, seed-samples or beam (ragmem data list)."),
    mirror: Optional[str] = typer.Option(None, "--mirror", help="Fetch the files from this base URL instead (a local copy; the checksums still apply)."),
    force: bool = typer.Option(False, "--force", help="Download again even when a verified copy is present."),
    scale: Optional[str] = typer.Option(None, "--scale", help="beam: the conversations' size, 100K (the paper's "
                                                              "128K), 500K or 1M (default 100K)."),
) -> None:
    """Download a published dataset into the home's cache ($RAGMEM_HOME/data/NAME), each file
    checked against its pinned sha256; a config names it as fetched:NAME/FILE."""
    if scale is not None and name != "beam":
        raise RagmemError(f"--scale: only beam has scales (got the dataset {name!r})")
    if name == "beam":
        chosen = published.BEAM_SCALES.get(scale or "100K")
        if chosen is None:
            raise RagmemError(f"--scale: expected one of {', '.join(published.BEAM_SCALES)}, got {scale!r}")
        name = f"beam-{chosen}"
    spec = published.dataset(name)
    target = published.fetch(name, mirror=mirror, force=force, say=say)
    say(f"{name}: {plural(len(spec.files), 'file')} in {target} (licence: {spec.licence}); a config names "
        f"them as {published.PREFIX}{name}/FILE")


@data_app.command("list")
def data_list() -> None:
    """The datasets ragmem can fetch, where they come from and whether they are here."""
    for spec in published.DATASETS.values():
        state = f"fetched, in {published.folder(spec.name)}" if published.is_fetched(spec.name) else "not fetched"
        say(f"{spec.name}: {spec.about}; from {spec.base_url}; {state}")


@labels_app.command("import")
def import_labels(
    run: str = typer.Argument(..., help="The run (id or unique prefix) whose examples were labelled."),
    sheet: Path = typer.Argument(..., help="The filled CSV: example_id and label (1 or 0) columns."),
    tracking_uri: Optional[str] = typer.Option(None, "--tracking-uri", help="Default: MLFLOW_TRACKING_URI or sqlite:///mlruns/mlflow.db."),
    encoding: str = typer.Option("utf-8-sig", "--encoding", help="The sheet's text encoding (a Chinese sheet saved by "
                                                                 "Excel is often gb18030)."),
) -> None:
    """Attach human labels to a run (MLflow assessments, source HUMAN) and recompute the judge's
    agreement with them and pass_rate_ppi, without calling the agent or the judge again."""
    summary = relabel.import_labels(store_uri(tracking_uri), run, sheet, encoding)
    done = summary["labels_imported"]
    print_summary(summary)
    say(f"labels: {plural(done['n_labels'], 'label')} from {sheet} attached to run {summary['run_id']} "
        f"as MLflow assessments (source HUMAN)" + (f"; {plural(done['n_blank'], 'row')} left blank" if done["n_blank"] else ""))


def report(
    runs: List[str] = typer.Argument(..., help="RUN for its report, or RUN_A RUN_B for a diff (ids or unique prefixes)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Where to write the HTML page (default: "
                                                                        "report.html; a diff: diff-A-B.html)."),
    tracking_uri: Optional[str] = typer.Option(None, "--tracking-uri", help="Default: MLFLOW_TRACKING_URI or sqlite:///mlruns/mlflow.db."),
    resamples: int = typer.Option(1000, "--resamples", help="Diff: bootstrap/randomization resamples."),
    seed: int = typer.Option(0, "--seed", help="Diff: random seed."),
) -> None:
    """Write a run's self-contained HTML report, or a diff of two runs example by example."""
    if len(runs) not in (1, 2):  # the arguments first: a mistake costs no store
        raise RagmemError(f"report: give one run id (its report) or two (a diff), got {len(runs)}")
    if resamples < 1:
        raise RagmemError(f"--resamples: expected a positive integer, got {resamples}")
    if output is None:  # a diff has a name of its own: it does not replace a run's report.html
        output = Path("report.html" if len(runs) == 1 else f"diff-{runs[0].strip()[:8]}-{runs[1].strip()[:8]}.html")
    output = writable(output)

    page = report_pages.from_tracking(store_client(tracking_uri), list(runs), resamples, seed)
    output.write_text(page, encoding="utf-8")
    out.print(f"{'diff' if len(runs) == 2 else 'report'} written to {output}", markup=False, highlight=False,
              soft_wrap=True)  # a long path stays one line


def init(
    folder: Path = typer.Argument(Path("."), help="The folder to make a ragmem home (default: here; made when missing)."),
    force: bool = typer.Option(False, "--force", help="Replace starter files that already exist."),
) -> None:
    """Make a folder a ragmem home: ragmem.toml, a starter config (ragmem.yaml) and five examples
    (data/examples.jsonl). Runs started in it or below it keep their results in it."""
    written = starter.init_home(folder, force=force)
    root = written[0].parent
    for path in written:
        say(f"wrote {path}")
    here = Path.cwd().resolve()
    go = "" if root == here else f"cd {root} && "
    say(f"next: {go}ragmem run {starter.CONFIG_NAME}  (runs are stored in {home.tracking_uri(root=root)})")


def trigger(name: str = typer.Argument(..., help="Deployment name (as ragmem serve printed it), or FLOW/NAME.")) -> None:
    """Start a run of a served deployment now (it runs in the ragmem serve process)."""
    url = configured_api_url() or f"http://127.0.0.1:{managed_port()}/api"
    if not healthy(url):
        raise RagmemError(f"trigger: no Prefect server answers at {url}; is ragmem serve running? "
                          "(it starts the local server; set PREFECT_API_URL for another one)")
    deployment, run_name, run_id = start(name, url)
    out.print(f"triggered {deployment}: flow run {run_name} ({run_id}); the ragmem serve process runs it",
              markup=False, highlight=False)


def unserve(name: str = typer.Argument(..., help="Deployment name (as ragmem serve printed it), or FLOW/NAME.")) -> None:
    """Remove a deployment ragmem serve made (its schedule and future runs; the runs it made stay)."""
    url = configured_api_url() or f"http://127.0.0.1:{managed_port()}/api"
    if not healthy(url):
        raise RagmemError(f"unserve: no Prefect server answers at {url} (ragmem server start starts the local one; "
                          "set PREFECT_API_URL for another)")
    out.print(f"removed {remove_deployment(name, url)}", markup=False, highlight=False)


def ui(
    port: int = typer.Option(5000, "--port", help="Port of the MLflow UI."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (127.0.0.1 keeps it local)."),
    tracking_uri: Optional[str] = typer.Option(None, "--tracking-uri",
                                               help="Store to show (default: MLFLOW_TRACKING_URI or sqlite:///mlruns/mlflow.db)."),
    workers: int = typer.Option(1, "--workers", help="Server worker processes (one is plenty for one user)."),
) -> None:
    """Serve the MLflow UI for the tracking store on 127.0.0.1 (one process; Ctrl+C stops it)."""
    setup_logging(False)  # (MLflow's INFO lines as it creates a new store: not news)
    uri = home.tracking_uri(tracking_uri)
    if workers < 1:
        raise RagmemError(f"--workers: expected a positive integer, got {workers}")
    if host not in ("127.0.0.1", "localhost", "::1"):  # the UI has no login: anyone who reaches it sees every run
        print(f"warning: --host {host}: the MLflow UI has no login, and anyone who can reach this machine on port "
              f"{port} can read and delete every run of {store_location(uri)}; --host 127.0.0.1 keeps it local",
              file=sys.stderr)
    try:
        serve_ui(uri, home.artifact_root(), host=host, port=port, workers=workers,
                 announce=lambda line: out.print(line, markup=False, highlight=False, soft_wrap=True))
    except KeyboardInterrupt:  # Ctrl+C or SIGTERM, after the server's graceful shutdown
        pass
    out.print("MLflow UI stopped")


@server_app.command("start")
def server_start(
    idle: float = typer.Option(prefect_server.DEFAULT_IDLE_S, "--idle-s", help="Seconds it may stay idle before it "
                                                                              "stops itself (orchestration.server_idle_s)."),
    keep: bool = typer.Option(False, "--keep", help="Keep it running until ragmem server stop (no idle stop)."),
) -> None:
    """Start (or find) the local Prefect server on 127.0.0.1, shared by every ragmem home."""
    setup_logging(False)
    if idle < 0:
        raise RagmemError(f"--idle-s: expected a number >= 0, got {idle:g}")
    server = ensure_managed_server(log=log.info, idle_s=None if keep else idle)
    out.print(f"Prefect server {'started' if server.started else 'already running'} at {server.api_url}",
              markup=False, highlight=False)


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


@server_app.command("status")
def server_status() -> None:
    """Show the Prefect API runs report to: the shared local server, the commands using it, when it
    stops, any other Prefect server running on this machine, and the deployments on the server runs
    report to (their schedules, whether paused, their next and last runs)."""
    import time

    url = configured_api_url()
    answers = healthy(url) if url else False  # (asked once: the deployments below are read from it when it answers)
    if url:
        out.print(f"PREFECT_API_URL={url} ({'answering' if answers else 'not answering'}): runs report there",
                  markup=False, highlight=False)
    found = prefect_server.status()
    def line(text: str) -> None:
        out.print(text, markup=False, highlight=False, soft_wrap=True)  # (paths and commands, not markup; one line each, never wrapped)

    if not found["running"]:
        line(f"local server {found['api_url']}: not running (started by the next run; its folder: {found['folder']})")
    else:
        silent = "" if found["answers"] else " but not answering (ragmem server stop stops it)"
        line(f"local server {found['api_url']}: running{silent}, pid {found['pid'] or 'unknown'}, shared by every "
            f"ragmem home (its folder: {found['folder']})")
        for lease in found["leases"]:
            line(f"  used by pid {lease['pid']} for {_age(time.time() - lease['since'])}: {lease['command']} "
                f"(home {lease['home']})")
        if found["leases"]:
            line("  stops once these end and it has been idle for their orchestration.server_idle_s")
        elif found["never_idle"]:
            line("  idle; keeps running until ragmem server stop (orchestration.server_idle_s: null)")
        elif found["idle_until"] is not None:
            line(f"  idle; stops itself in {_age(found['idle_until'] - time.time())} unless a command uses it")
    for other in found["others"]:
        whose = (f"an older ragmem's server of one home; RAGMEM_HOME={other['home']} ragmem server stop stops it"
                 if other["home"] else "not ragmem's")
        line(f"other Prefect server: pid {other['pid']}, port {other['port']}, database {other['prefect_home']}, "
            f"started from {other['cwd']} ({whose})")
    answering = url if answers else (found["api_url"] if found["answers"] else None)
    if answering:
        _print_deployments(answering, line)


def _when(moment) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M %Z") if moment is not None else "unknown"


def _print_deployments(api_url: str, line) -> None:
    """The deployments ``ragmem serve`` made (and any other) on the server runs report to, with their
    schedules and next runs."""
    try:
        found = deployments(api_url)
    except Exception as exc:  # a server that stopped answering since, or answers oddly: status still ends well
        line(f"deployments at {api_url}: not read ({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})")
        return
    if not found:
        line(f"deployments at {api_url}: none (ragmem serve CONFIG --cron ... makes one)")
        return
    line(f"deployments at {api_url}:")
    for d in found:
        crons = ", ".join(f"cron '{s['cron']}'" + (f" {s['timezone']}" if s["timezone"] else "") +
                          ("" if s["active"] else " (inactive)") for s in d["schedules"]) or "no schedule"
        if d["paused"]:
            state = "paused: no run is scheduled (ragmem serve CONFIG resumes it; ragmem unserve NAME removes it)"
        elif d["next"] is not None:
            state = f"next run {_when(d['next'])}"
        else:
            state = "no run scheduled yet" if d["schedules"] else "runs only when triggered (ragmem trigger NAME)"
        last = f"; last run {d['last'][0]} {_when(d['last'][1])}" if d["last"] else "; no run yet"
        line(f"  {d['name']}: {crons}; {state}{last}")


@server_app.command("stop")
def server_stop() -> None:
    """Stop the local Prefect server (and the one an older ragmem started for this home)."""
    out.print("stopped" if stop_managed_server() else "no local Prefect server of ragmem is running")


def validate(
    data: Path = typer.Argument(..., help="Dataset file (JSON, JSONL, CSV or Parquet)."),
    label: Optional[int] = typer.Option(None, "--label", help="File-level label (1 correct, 0 wrong)."),
    format: str = typer.Option("auto", "--format", help="json, jsonl, csv, parquet or auto (by suffix)."),
    no_answer: bool = typer.Option(False, "--no-answer", help="Answers come from a live agent: do not require them."),
    coerce_numbers: bool = typer.Option(False, "--coerce-numbers", help="Read numbers as text (data.coerce_numbers)."),
    encoding: str = typer.Option("utf-8", "--encoding", help="Text encoding (data.encoding), e.g. gb18030."),
) -> None:
    """Report every invalid record; exit 0 when the file is valid, 2 when not."""
    if label not in (None, 0, 1):
        raise RagmemError(f"--label: expected 0 or 1, got {label}")
    try:
        check_encoding(encoding)
    except ValueError as exc:
        raise RagmemError(f"--encoding: {exc}") from None
    setup_logging(False)  # (the progress lines go to the ragmem logger)
    with progress.stage("validate", unit="records") as stage:  # (a long file: a line every 10 s)
        report = check_file(DataFile(data, label, format, coerce_numbers, encoding), require_answer=not no_answer,
                            keep=False, on_batch=stage.advance, count=needs.fed_counters())
    questions = None if no_answer else questions_only(report, DataFile(data, label, format, coerce_numbers, encoding),
                                                      needs.fed_counters())
    if questions is not None:  # a test set: questions for an agent to answer (ragmem generate writes them)
        print(f"{data}: {plural(questions.n_records, 'question')}, ready for an agent (agent.type "
              f"python/http/reference); replay needs answers")
        report = questions
    for problem in report.problems:
        print(f"invalid: {problem}", file=sys.stderr)
    n_bad = len({p.record for p in report.problems})
    if report.problems:
        print(f"{data}: {plural(report.n_records, 'record')}, {n_bad} invalid, {plural(len(report.problems), 'problem')}",
              file=sys.stderr)
        raise typer.Exit(2)
    if questions is None:
        print(f"{data}: {plural(report.n_records, 'record')}, all valid")
    for line in needs.fed(report.held, report.n_records):  # (a live agent's contexts are its own)
        print(line)


alerts_app = typer.Typer(no_args_is_help=True, help="Alerts of failed gates, drifts and failed runs (alerts: in a config).")


@alerts_app.command("test")
def alerts_test(config: Path = typer.Argument(..., help="A config with an alerts: section.")) -> None:
    """Send one test message to every destination of the config's alerts.to."""
    setup_logging(False)
    cfg = resolve_settings(config)
    if not cfg.alerts.to:
        raise ConfigError(f"{config}: alerts.to: no destination to test (alerts: {{to: [URL, ...]}})")
    failed = notify.send(cfg.alerts.to, f"ragmem {cfg.experiment}: test alert",
                           f"A test message from ragmem alerts test {config.name} (experiment {cfg.experiment}): "
                           "this destination will hear of failed gates, drifts and failed runs.", warn=False)
    for url in cfg.alerts.to:
        if not any(line.startswith(f"alert not delivered to {scheme_of(url)}") for line in failed):
            say(f"alert sent to {scheme_of(url)}")
    if failed:  # (delivery, not the config: exit 3)
        raise RunFailed(failed[0] if len(failed) == 1 else f"{len(failed)} of {len(cfg.alerts.to)} destinations "
                        f"failed: {'; '.join(failed)}")
