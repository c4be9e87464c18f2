"""``ragmem ui``: MLflow's UI and REST API for a store, served by this one process.

``mlflow ui`` starts a supervisor that starts uvicorn, plus a job runner with seven huey consumers
(measured: 10 processes, 1.3 GB, 16 s to stop on Ctrl+C, children lingering 15 s more). ragmem needs
none of the jobs (they run server-side scorers and trace roll-ups), so it does what ``mlflow ui``
does before it spawns anything (the store's settings in the environment MLflow's app reads, the
stores initialised) and then serves MLflow's FastAPI app with uvicorn in this process: one
process, and Ctrl+C or SIGTERM ends it within a second of graceful shutdown. ``--workers N``
(N > 1) lets uvicorn start N worker processes, ended with it.
"""

from __future__ import annotations

import logging
import os
import warnings

from ragmem.errors import RagmemError
from ragmem.runtime.imports import lean_import
from ragmem.runtime.processes import bind_error
from ragmem.tracking.runs import latest_run
from ragmem.tracking.store import prepare_local_store

APP = "mlflow.server.fastapi_app:app"


def _check_port(host: str, port: int) -> None:
    """The port is free: a taken one is one line before anything starts (uvicorn would log an error)."""
    exc = bind_error(host, port)
    if exc is not None:
        raise RagmemError(f"--port {port}: cannot listen on {host}:{port} ({exc.strerror or exc}); "
                          f"pick another with --port")


def runs_page(uri: str) -> tuple[str, str] | None:
    """``(experiment name, "#/experiments/ID/runs")``: the runs of the experiment of the latest run in
    the store (MLflow's UI opens on its GenAI overview, "Traces 0", for an evaluation's experiment),
    or ``None`` when the store holds no runs."""
    client = lean_import("mlflow.tracking").MlflowClient(uri)
    run = latest_run(client)
    if run is None:
        return None
    experiment = run.info.experiment_id
    return client.get_experiment(experiment).name, f"#/experiments/{experiment}/runs"


def serve_ui(uri: str, artifact_root: str, host: str = "127.0.0.1", port: int = 5000, workers: int = 1,
             announce=print) -> None:
    """Serve MLflow's UI for the store ``uri`` on ``host:port`` until Ctrl+C or SIGTERM."""
    _check_port(host, port)
    prepare_local_store(uri)
    if not os.environ.get("PYTHONWARNINGS"):  # Starlette's and the app's deprecation notices: not the user's
        warnings.simplefilter("ignore")
    constants = lean_import("mlflow.server.constants")
    os.environ.update({
        constants.BACKEND_STORE_URI_ENV_VAR: uri,
        constants.REGISTRY_STORE_URI_ENV_VAR: uri,
        constants.ARTIFACT_ROOT_ENV_VAR: artifact_root,
        constants.SERVE_ARTIFACTS_ENV_VAR: "true",
        "_MLFLOW_SGI_NAME": "uvicorn",                   # what `mlflow server` tells its app
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",   # no job runner, no huey consumers
    })
    # quiet: the app's dependencies' deprecation warnings and INFO lines are not the user's to act on
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    handlers = lean_import("mlflow.server.handlers")
    handlers.initialize_backend_stores(uri, uri, artifact_root)
    uvicorn = lean_import("uvicorn")
    for name in ("mlflow", "alembic", "uvicorn.error"):
        logging.getLogger(name).setLevel(logging.WARNING)
    page = runs_page(uri)
    announce(f"MLflow UI for {uri} at http://{host}:{port} (Ctrl+C to stop)"
             + (f"; the runs of '{page[0]}': http://{host}:{port}/{page[1]}" if page else ""))
    uvicorn.run(APP, host=host, port=port, workers=workers, log_level="warning", access_log=False,
                timeout_graceful_shutdown=1)
