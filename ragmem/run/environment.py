"""What the machine must offer before any work: a usable tracking store and a writable ragmem home.

Checked by every command that runs something (``run``, ``sweep``, ``serve``, ``bench-memory``, and
``ragmem.evaluate``) right after the settings, before the Prefect server starts and before any agent
or LLM call; a problem is one :class:`ragmem.errors.ConfigError` line naming the path or URI (exit 2).

- The tracking URI's scheme is one MLflow can store runs in (``sqlite``, ``postgresql``, ``mysql``,
  ``mssql``, ``http(s)``, ``databricks``, ``file``); a remote server is probed by the endpoint
  preflight, not here.
- A SQLite store: its folder can be created and written, and an existing database file is a SQLite
  database that accepts a write lock (a corrupted, truncated, or read-only file is named).
- ``$RAGMEM_HOME`` (journals, judge cache, the local Prefect server): can be created and written.
- What building the components would find wrong, without building them (building the reference
  agent indexes its corpus; a Python agent's class may connect to services): a Python agent's target
  imports, every named ``api_key_env`` variable is set, the reference agent's corpus file exists; an
  mcp memory layer has the ``mcp`` package and, for a stdio server, a program that exists.
- The ``baseline`` run of ``max_regression`` gates is in the tracking store, with its per-example table.
- A streamed dataset on a Dask cluster (``orchestration.dask_address``): every worker reads the data
  files and writes ``$RAGMEM_HOME/runs`` at this process's paths (:func:`check_dask_workers`, once the
  data is loaded).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from ragmem.agents.python import resolve
from ragmem.metrics import custom
from ragmem.clients.endpoints import configured
from ragmem.errors import ConfigError, RagmemError
from ragmem.memory.mcp_layer import MISSING_SDK
from ragmem.runtime.home import ragmem_home
from ragmem.tracking.uri import check_tracking, tracking_source, writable_folder

def _check_mcp(method, i: int) -> None:
    """An mcp layer: the SDK installed, and a stdio server's program found (a path, or on PATH)."""
    if importlib.util.find_spec("mcp") is None:
        raise ConfigError(f"bench.methods[{i}].{MISSING_SDK}")
    program = (method.command or [None])[0]
    if program and not (shutil.which(program) or (os.sep in program and Path(program).is_file())):
        raise ConfigError(f"bench.methods[{i}].command: {program!r} is not a program on PATH nor a file")


def check_components(cfg) -> None:
    """The agent target, the key variables and the corpus (module docstring), for ``cfg``."""
    if cfg.agent.type == "python":
        resolve(cfg.agent.target, cfg.import_paths)
    custom.load(cfg.metrics.custom, cfg.import_paths)  # metrics of one's own: imported, their parameters read
    given = [i for i, m in enumerate(cfg.metrics.custom) if m.target.startswith("given:")]
    if given and cfg.orchestration.task_runner == "dask":
        raise ConfigError(f"metrics.custom[{given[0]}].target: a function given from the Python API exists only in this "
                          f"process, and orchestration.task_runner dask scores on other processes: name it as "
                          f"module:function")
    for i, method in enumerate(cfg.bench.methods if cfg.bench.data else ()):
        target = getattr(method, "target", None)
        if getattr(method, "type", None) == "python" and target:
            try:
                resolve(target, cfg.import_paths)
            except RagmemError as exc:
                raise ConfigError(f"bench.methods[{i}].{str(exc).removeprefix('agent.')}") from None
        if getattr(method, "type", None) == "mcp":
            _check_mcp(method, i)
    sections = {"judge.base_url": "judge", "embeddings.base_url": "embeddings", "generator.base_url": "generator",
                "agent.url": "agent"}
    for endpoint in configured(cfg):
        section = sections.get(endpoint.setting)
        variable = getattr(getattr(cfg, section), "api_key_env", None) if section else None
        if variable and not os.environ.get(variable):
            raise ConfigError(f"{section}.api_key_env: the environment variable {variable} is not set")
    if cfg.agent.type == "reference" and cfg.corpus.path != "bundled" and not Path(cfg.corpus.path).is_file():
        raise ConfigError(f"corpus.path: {cfg.corpus.path}: file not found")


def check(cfg) -> None:
    """Every check above for a :class:`ragmem.config.loading.RunConfig`."""
    check_components(cfg)

    writable_folder(ragmem_home(), "RAGMEM_HOME" if os.environ.get("RAGMEM_HOME") else "the ragmem home (.ragmem)")
    if cfg.tracking.enabled:
        check_tracking(cfg.tracking_uri, tracking_source(cfg))
        if cfg.tracking_uri.startswith("sqlite:"):
            writable_folder(Path(cfg.artifact_root), "tracking.artifact_root")


def check_dask_workers(address: str, paths: list[Path], examples: int) -> None:
    """The workers of the cluster at ``address`` (``orchestration.dask_address``) read a streamed
    dataset's chunks and write the run's folder themselves (:mod:`ragmem.data.segments`): each must read
    every data file and write ``$RAGMEM_HOME/runs`` at this process's paths (a shared file system)."""
    from distributed import Client  # only for a streamed run on a cluster

    runs = ragmem_home() / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    with Client(address, timeout=30) as client:
        found = client.run(reach, [str(p.resolve()) for p in paths], str(runs))
    for worker, problem in sorted(found.items()):
        if problem:
            raise ConfigError(f"orchestration.dask_address {address}: the worker at {worker} {problem}; the workers "
                              f"read the chunks of a dataset over data.chunk_size and write {runs} themselves: give "
                              f"them these paths (a shared file system), or set data.chunk_size to {examples} or more")


def reach(paths: list[str], runs: str) -> str | None:
    """What this process (a Dask worker) cannot do of what a chunk needs, or None."""
    for path in paths:
        if not os.access(path, os.R_OK):
            return f"cannot read {path}"
    try:
        with tempfile.NamedTemporaryFile(dir=runs):
            return None
    except OSError:
        return f"cannot write {runs}"
