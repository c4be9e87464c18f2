"""The MLflow store: :class:`Tracker`, every MLflow client call by explicit run id (MLflow's
process-wide tracking URI is never set: the agent traces are written through a client of the
store's own, :mod:`ragmem.tracking.agent_traces`)."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from ragmem.errors import ConfigError
from ragmem.runtime import home
from ragmem.runtime.imports import lean_import
from ragmem.runtime.processes import host, run_is_dead
from ragmem.tracking import agent_traces, empty_store
from ragmem.tracking.claims import Claim, PREFIX
from ragmem.tracking.files import table_files
from ragmem.tracking.uri import DATABASE_SCHEMES, sqlite_file, tracking_scheme

_PARAM_LIMIT = 6000  # MLflow's limit for a param value
_ERROR_TAG_LIMIT = 5000
#: the MLflow runs one process may hold open at once (a racing sweep's children all run together: at
#: most this many, ragmem.run.racing), and the database store's connections they need: SQLAlchemy's
#: default pool (5 + 10 more) refused the 16th child of an 18-configuration race
OPEN_RUNS = 96
os.environ.setdefault("MLFLOW_SQLALCHEMYSTORE_MAX_OVERFLOW", str(OPEN_RUNS + 14))  # (read when a store is made)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "experiment"


def prepare_local_store(uri: str) -> None:
    """Create the folder of a relative or absolute sqlite file so MLflow can open it, and a new
    store's tables under a lock beside it: eight runs started at once on a new project each created
    the schema, and four failed (``table ... already exists``). The first creates it; the others
    wait, then find it made (MLflow keeps the store it opened for this process). A new store is a
    copy of an empty one MLflow migrated once (:mod:`ragmem.tracking.empty_store`), else migrated."""
    db = sqlite_file(uri)
    if db is None:
        return
    db.parent.mkdir(parents=True, exist_ok=True)
    if db.is_file() and db.stat().st_size > 0 and not db.with_name(db.name + ".creating").exists():
        return
    from mlflow.tracking._tracking_service.utils import _get_store

    with home.file_lock(db.with_name(db.name + ".lock"), what="the MLflow store"):
        marker = db.with_name(db.name + ".creating")  # (a creation that died half-way is finished by the next)
        marker.touch()
        if not (db.is_file() and db.stat().st_size > 0):
            empty_store.copy_into(db)
        _get_store(uri)  # MLflow opens it (migrating a store that is not a copy), cached for this process
        marker.unlink(missing_ok=True)


def is_transient(exc: BaseException) -> bool:
    """Whether a failed tracking call is worth retrying: the store was busy or unreachable
    (connection errors, HTTP 429/5xx from a tracking server, SQLite's "database is locked").
    A bad value, a missing run or a permission error is not: retrying it only repeats it."""
    import requests
    from mlflow.exceptions import MlflowException

    if isinstance(exc, (ConnectionError, TimeoutError, requests.ConnectionError, requests.Timeout)):
        return True
    if isinstance(exc, sqlite3.OperationalError) or "database is locked" in str(exc):
        return "locked" in str(exc) or "busy" in str(exc)
    if isinstance(exc, MlflowException):
        status = getattr(exc, "get_http_status_code", lambda: 500)()
        return status == 429 or status >= 500 and ("locked" in str(exc) or "Connection" in str(exc)
                                                   or "temporarily" in str(exc).lower())
    return False


@dataclass(frozen=True)
class Feedback:
    """One assessment of an example, attached to its trace (MLflow's ``Feedback``)."""

    name: str
    value: float | int | str | bool | None
    rationale: str | None = None
    source_type: str = "CODE"  # or LLM_JUDGE
    source_id: str = "ragmem"


_DATASETS = threading.Lock()
EXPERIMENT_KIND = "custom_model_development"  # the UI opens on the runs, not on an empty GenAI overview


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def source_tags() -> dict[str, str]:
    """MLflow's source tags for the runs this process creates (the UI's Source column): the command
    (``RAGMEM_SOURCE_NAME``, set by the ``ragmem`` command line: ``ragmem run configs/demo.yaml``;
    else the script), ``JOB`` for scheduled runs (``ragmem serve``) and ``LOCAL`` otherwise, and the
    working directory's git commit and branch when it is a git checkout."""
    name = os.environ.get("RAGMEM_SOURCE_NAME") or (
        os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] not in ("", "-c") else "python")
    tags = {"mlflow.source.name": name, "mlflow.source.type": "JOB" if name.startswith("ragmem serve") else "LOCAL"}
    return tags | _git_tags(os.getcwd())


@functools.lru_cache(maxsize=8)
def _git_tags(cwd: str) -> dict[str, str]:
    tags = {}
    for key, args in (("mlflow.source.git.commit", ("rev-parse", "HEAD")),
                      ("mlflow.source.git.branch", ("rev-parse", "--abbrev-ref", "HEAD"))):
        value = _git("-C", cwd, *args)
        if value:
            tags[key] = value
    return tags


class Tracker:
    """A thin, explicit-run-id wrapper over ``MlflowClient``."""

    def __init__(self, uri: str, artifact_root: str | None = None):
        MlflowClient = lean_import("mlflow").MlflowClient
        if tracking_scheme(uri) in DATABASE_SCHEMES:
            lean_import("mlflow.store.tracking.sqlalchemy_store")  # the client's store for a database URI

        prepare_local_store(uri)
        self.uri = uri
        self.artifact_root = home.artifact_root(artifact_root)
        self.client = MlflowClient(tracking_uri=uri)

    def experiment_id(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            if found.lifecycle_stage == "deleted":
                self.client.restore_experiment(found.experiment_id)
            return found.experiment_id
        try:
            return self.client.create_experiment(name, artifact_location=self.location(name),
                                                 tags={"mlflow.experimentKind": EXPERIMENT_KIND})
        except Exception:  # created concurrently by another process: use theirs
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id

    def location(self, name: str) -> str:
        """Where the experiment ``name``'s artifacts go: under ``tracking.artifact_root``."""
        if not re.match(r"^[a-z][a-z0-9+.-]*://", self.artifact_root):
            return (Path(self.artifact_root) / _slug(name)).as_uri()
        return f"{self.artifact_root.rstrip('/')}/{_slug(name)}"

    def claim(self, name: str) -> Claim:
        """The claim on ``name`` in this store (:mod:`ragmem.tracking.claims`)."""
        return Claim(self.client, name, self.location(PREFIX))

    def create_run(self, experiment: str, run_name: str | None = None, tags: dict[str, str] | None = None,
                   parent_run_id: str | None = None) -> str:
        """A new run (status RUNNING until :func:`tracked_run` ends it), tagged with the host and pid
        that run it (``ragmem.host``, ``ragmem.pid``): a run left RUNNING by a dead process is then
        recognisable (see :mod:`ragmem.run.resume`)."""
        tags = {**source_tags(), "ragmem.host": host(), "ragmem.pid": str(os.getpid()), **(tags or {})}
        if parent_run_id:
            tags["mlflow.parentRunId"] = parent_run_id
        run = self.client.create_run(self.experiment_id(experiment), run_name=run_name, tags=tags)
        return run.info.run_id

    def reopen(self, run_id: str, allow_finished: bool = False) -> None:
        """Continue an ended (KILLED or FAILED) run, or one left RUNNING by a dead process: status
        RUNNING again, this process's host and pid, and the tag ``ragmem.resumed`` counting resumes.
        A FINISHED run, a run whose process still runs, or one of another host is refused."""
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException:
            raise ConfigError(f"--resume {run_id}: no such run in {self.uri}") from None
        status, tags = run.info.status, run.data.tags
        if status == "FINISHED" and not allow_finished:  # (a sweep parent with unfinished children)
            raise ConfigError(f"--resume {run_id}: the run already FINISHED; nothing to resume")
        if status == "RUNNING":
            dead = run_is_dead(tags)
            if dead is False:
                raise ConfigError(f"--resume {run_id}: the run is still running (pid {tags.get('ragmem.pid')})")
            if dead is None:
                raise ConfigError(f"--resume {run_id}: the run is RUNNING on host {tags.get('ragmem.host', '?')}; "
                                  f"resume it there, or once it has ended")
        self.client.update_run(run_id, status="RUNNING")
        if "ragmem.error" in tags:  # the reason it ended before; it is going again
            self.client.delete_tag(run_id, "ragmem.error")
        resumed = int(tags.get("ragmem.resumed", "0") or 0) + 1
        self.set_tags(run_id, {"ragmem.resumed": str(resumed), "ragmem.host": host(), "ragmem.pid": str(os.getpid()),
                               "ragmem.resumed_from_status": status})

    def log_params(self, run_id: str, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        items = []
        for key, value in params.items():
            text = str(value)
            if len(text) > _PARAM_LIMIT:
                text = text[: _PARAM_LIMIT - 20] + "...(truncated)"
            items.append(Param(key, text))
        for start in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[start:start + 100])

    def log_metrics(self, run_id: str, metrics: dict[str, float | None], step: int = 0) -> None:
        """Log the defined metrics; ``None``/NaN (not measured, undefined) are not logged as numbers."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, step) for k, v in metrics.items()
                 if v is not None and not (isinstance(v, float) and math.isnan(v))]
        for start in range(0, len(items), 500):
            self.client.log_batch(run_id, metrics=items[start:start + 500])

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            self.client.set_tag(run_id, key, value)

    def tags(self, run_id: str) -> dict[str, str]:
        return dict(self.client.get_run(run_id).data.tags)

    def log_json(self, run_id: str, payload: Any, artifact_file: str) -> None:
        self.client.log_dict(run_id, payload, artifact_file)

    def log_table(self, run_id: str, table: pd.DataFrame, name: str) -> None:
        """The table twice, ``<name>.csv`` and ``<name>.json`` (:func:`ragmem.tracking.files.table_files`)."""
        with tempfile.TemporaryDirectory() as tmp:
            self.log_table_files(run_id, table_files(table, tmp, name))

    def log_table_files(self, run_id: str, paths: list[str]) -> None:
        """Log a table's files (:func:`ragmem.tracking.files.table_files`), the JSON one as an MLflow
        table: the ``mlflow.loggedArtifacts`` tag names it, which is what the UI reads. Not by
        ``MlflowClient.log_table``: that one tests every cell of an object column for an image,
        appends to a table already logged (a resumed run would double its rows) and keeps 10
        significant digits; this replaces it, keeps 15, and takes a third of the time."""
        from mlflow.utils.mlflow_tags import MLFLOW_LOGGED_ARTIFACTS

        for path in paths:
            self.client.log_artifact(run_id, path)
            if path.endswith(".json"):
                entry = {"path": Path(path).name, "type": "table"}
                logged = json.loads(self.client.get_run(run_id).data.tags.get(MLFLOW_LOGGED_ARTIFACTS, "[]"))
                if entry not in logged:
                    self.client.set_tag(run_id, MLFLOW_LOGGED_ARTIFACTS, json.dumps([*logged, entry]))

    def log_dataset(self, run_id: str, name: str, digest: str, source: str, schema: dict[str, Any],
                    profile: dict[str, Any], context: str = "evaluation") -> None:
        """The run's input dataset (the UI's Dataset column and Datasets page). MLflow caps a digest
        at 36 characters: ``digest`` is cut to that (the whole sha256 is in ``profile``)."""
        from mlflow.entities import Dataset, DatasetInput, InputTag

        dataset = Dataset(name=name, digest=digest[:36], source_type="local", source=json.dumps({"uri": source}),
                          schema=json.dumps(schema), profile=json.dumps(profile))
        entry = [DatasetInput(dataset, tags=[InputTag("mlflow.data.context", context)])]
        # the store inserts a dataset it has not seen: sweep children logging the same data at once
        # would race on its unique key (serialized here; another process's insert: tried again once)
        with _DATASETS:
            try:
                self.client.log_inputs(run_id, datasets=entry)
            except Exception as exc:
                if "UNIQUE" not in str(exc) and "Duplicate" not in str(exc):
                    raise
                self.client.log_inputs(run_id, datasets=entry)

    def log_text(self, run_id: str, text: str, artifact_file: str) -> None:
        self.client.log_text(run_id, text, artifact_file)

    def log_file(self, run_id: str, path: str | Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(run_id, str(path), artifact_path)

    def log_figure(self, run_id: str, figure: Any, artifact_file: str) -> None:
        self.client.log_figure(run_id, figure, artifact_file)

    def log_agent_traces(self, run_id: str, experiment: str, examples, outputs, limit: int,
                         assess: Callable[[list[str]], dict[str, list[Feedback]]] | None = None) -> int:
        """One MLflow trace per timed agent call, with a span per reported stage, so a slow or wrong
        answer can be opened in the UI: at most ``limit`` calls, failed calls first, then the slowest,
        each with the assessments ``assess(example ids)`` gives for its example (the judge's verdict,
        per-example scores), written in one batch (:mod:`ragmem.tracking.agent_traces`: 10 ms a trace
        on sqlite). Returns how many."""
        timed = agent_traces.traced_calls(examples, outputs, limit)
        if not timed:
            return 0
        return agent_traces.log(self.uri, run_id, self.experiment_id(experiment), timed, assess)

    def log_human_labels(self, run_id: str, experiment_id: str, rows: list[tuple[str, int, str, str]],
                         source_id: str) -> int:
        """Each ``(example id, label, query, answer)`` as an assessment ``human_label`` with source
        HUMAN on the example's trace in run ``run_id``: its agent trace when the run traced the call,
        else a trace of its own (the query in, the answer out) made for it; a label the trace already
        carries is not added again. Returns how many."""
        from mlflow.entities import AssessmentSource
        from mlflow.entities import Feedback as MlflowFeedback
        from mlflow.tracing.client import TracingClient

        traced: dict[str, str] = {}
        held: dict[str, set] = {}  # human labels the traces already carry: an import run twice adds none
        token = None
        while True:
            page = self.client.search_traces(locations=[experiment_id], run_id=run_id, max_results=500,
                                             page_token=token, include_spans=False)
            for trace in page:
                example = trace.info.tags.get("ragmem.example_id")
                if example is not None:
                    traced.setdefault(example, trace.info.trace_id)
                    held.setdefault(example, set()).update(
                        a.value for a in trace.info.assessments or () if a.name == "human_label")
            token = page.token
            if not token:
                break
        rationale = "imported with ragmem labels import"
        new: dict[str, tuple] = {}  # an example without a trace: one made for it, its labels on it
        for example, label, query, answer in rows:
            if example not in traced:
                request, response = {"query": query}, {"answer": answer}
                if example not in new:  # (its trace made once, whatever the number of its labels)
                    new[example] = (example, agent_traces.plain_trace(experiment_id, request, response), request,
                                    response, "labelled example", [])
                new[example][-1].append(Feedback("human_label", int(label), rationale, "HUMAN", source_id))
        if new:
            agent_traces.write(self.uri, run_id, experiment_id, list(new.values()))
        client = TracingClient(self.uri)
        for example, label, _, _ in rows:
            if example in new or int(label) in held.get(example, ()):
                continue
            client.log_assessment(traced[example], MlflowFeedback(
                name="human_label", value=int(label), rationale=rationale,
                source=AssessmentSource(source_type="HUMAN", source_id=source_id)))
        return len(rows)

    def _terminate(self, run_id: str, status: str) -> None:
        self.client.set_terminated(run_id, status=status)
