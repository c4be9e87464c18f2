"""The ``ragmem`` commands around the runs: the local Prefect server (``server start|status|stop``),
the MLflow UI (``ui``), triggering a served deployment (``trigger``) and the HTML report
(``report``). Registered on the one ``ragmem`` command in :mod:`ragmem.cli`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from ragmem import relabel, report_html
from ragmem.cli_common import log, setup_logging, store_client, store_uri, writable
from ragmem.config import DEFAULT_ARTIFACT_ROOT, DEFAULT_TRACKING_URI
from ragmem.errors import RagmemError
from ragmem.journal import ragmem_home
from ragmem.orchestration import (
    configured_api_url,
    ensure_managed_server,
    healthy,
    managed_port,
    server_owner,
    stop_managed_server,
)
from ragmem.report import out, plural, print_summary, say
from ragmem.scheduling import trigger as start
from ragmem.tracking import prepare_local_store

server_app = typer.Typer(no_args_is_help=True, help="The local Prefect server ragmem manages.")
labels_app = typer.Typer(no_args_is_help=True, help="Human labels of a run's examples (judge.label_sample).")


@labels_app.command("import")
def import_labels(
    run: str = typer.Argument(..., help="The run (id or unique prefix) whose examples were labelled."),
    sheet: Path = typer.Argument(..., help="The filled CSV: example_id and label (1 or 0) columns."),
    tracking_uri: Optional[str] = typer.Option(None, "--tracking-uri", help="Default: MLFLOW_TRACKING_URI or sqlite:///mlruns/mlflow.db."),
) -> None:
    """Attach human labels to a run (MLflow assessments, source HUMAN) and recompute the judge's
    agreement with them and pass_rate_ppi, without calling the agent or the judge again."""
    summary = relabel.import_labels(store_uri(tracking_uri), run, sheet)
    done = summary["labels_imported"]
    print_summary(summary)
    say(f"labels: {plural(done['n_labels'], 'label')} from {sheet} attached to run {summary['run_id']} "
        f"as MLflow assessments (source HUMAN)" + (f"; {plural(done['n_blank'], 'row')} left blank" if done["n_blank"] else ""))


def report(
    runs: List[str] = typer.Argument(..., help="RUN for its report, or RUN_A RUN_B for a diff (ids or unique prefixes)."),
    output: Path = typer.Option(Path("report.html"), "--output", "-o", help="Where to write the HTML page."),
    tracking_uri: Optional[str] = typer.Option(None, "--tracking-uri", help="Default: MLFLOW_TRACKING_URI or sqlite:///mlruns/mlflow.db."),
    resamples: int = typer.Option(1000, "--resamples", help="Diff: bootstrap/randomization resamples."),
    seed: int = typer.Option(0, "--seed", help="Diff: random seed."),
) -> None:
    """Write a run's self-contained HTML report, or a diff of two runs example by example."""
    if len(runs) not in (1, 2):  # the arguments first: a mistake costs no store
        raise RagmemError(f"report: give one run id (its report) or two (a diff), got {len(runs)}")
    if resamples < 1:
        raise RagmemError(f"--resamples: expected a positive integer, got {resamples}")
    output = writable(output)

    page = report_html.from_tracking(store_client(tracking_uri), list(runs), resamples, seed)
    output.write_text(page, encoding="utf-8")
    out.print(f"{'diff' if len(runs) == 2 else 'report'} written to {output}", markup=False, highlight=False,
              soft_wrap=True)  # a long path stays one line


def trigger(name: str = typer.Argument(..., help="Deployment name (as ragmem serve printed it), or FLOW/NAME.")) -> None:
    """Start a run of a served deployment now (it runs in the ragmem serve process)."""
    url = configured_api_url() or f"http://127.0.0.1:{managed_port()}/api"
    if not healthy(url):
        raise RagmemError(f"trigger: no Prefect server answers at {url}; is ragmem serve running? "
                          "(it starts the local server; set PREFECT_API_URL for another one)")
    deployment, run_name, run_id = start(name, url)
    out.print(f"triggered {deployment}: flow run {run_name} ({run_id}); the ragmem serve process runs it",
              markup=False, highlight=False)


def ui(
    port: int = typer.Option(5000, "--port", help="Port of the MLflow UI."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (127.0.0.1 keeps it local)."),
    tracking_uri: Optional[str] = typer.Option(None, "--tracking-uri",
                                               help="Store to show (default: MLFLOW_TRACKING_URI or sqlite:///mlruns/mlflow.db)."),
    workers: int = typer.Option(1, "--workers", help="Server worker processes (one is plenty for one user)."),
) -> None:
    """Serve the MLflow UI for the tracking store on 127.0.0.1."""
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
    prepare_local_store(uri)
    out.print(f"MLflow UI for {uri} at http://{host}:{port} (Ctrl+C to stop)")
    command = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--registry-store-uri", uri,
               "--default-artifact-root", str(Path(DEFAULT_ARTIFACT_ROOT).resolve()),
               "--host", host, "--port", str(port), "--workers", str(workers),
               "--uvicorn-opts", "--log-level warning"]  # (uvicorn's per-start INFO lines)
    # quiet: MLflow's server prints its dependencies' deprecation warnings (Starlette's are UserWarnings)
    # and INFO lines about its job backends; not the user's to act on. Errors still show.
    env = {**os.environ, "PYTHONWARNINGS": os.environ.get("PYTHONWARNINGS") or "ignore",
           "MLFLOW_LOGGING_LEVEL": os.environ.get("MLFLOW_LOGGING_LEVEL") or "WARNING"}
    os.execve(sys.executable, command, env)


@server_app.command("start")
def server_start() -> None:
    """Start (or find) the local Prefect server on 127.0.0.1."""
    setup_logging(False)
    server = ensure_managed_server(log=log.info)
    out.print(f"Prefect server {'started' if server.started else 'already running'} at {server.api_url}")


@server_app.command("status")
def server_status() -> None:
    """Show which Prefect API runs report to, and which checkout and ragmem home started it."""
    url = configured_api_url()
    if url:
        out.print(f"PREFECT_API_URL={url} ({'answering' if healthy(url) else 'not answering'})")
        return
    url = f"http://127.0.0.1:{managed_port()}/api"
    if not healthy(url):
        out.print(f"local server {url}: not running (started by the next run)")
        return
    owner = server_owner(managed_port())
    here = str(ragmem_home().resolve())
    if owner is None:
        out.print(f"local server {url}: running (started outside ragmem, or its process is not visible here)")
    elif owner["home"] and str(Path(owner["home"]).resolve()) == here:
        out.print(f"local server {url}: running, pid {owner['pid']}, started from {owner['cwd']} "
                  f"with this ragmem home ({here})", markup=False, highlight=False)
    else:
        out.print(f"local server {url}: running, pid {owner['pid']}, started from {owner['cwd']} with another "
                  f"ragmem home ({owner['home']}); ragmem server stop stops only a server this home started",
                  markup=False, highlight=False)


@server_app.command("stop")
def server_stop() -> None:
    """Stop the local Prefect server ragmem started."""
    out.print("stopped" if stop_managed_server() else "no server started by this ragmem home is running")
