"""The one preparation of a run, for the command line and the Python API alike.

    resolve:   defaults <- config file <- API arguments <- --set <- --data, validated once as a
               RunConfig, then as a whole run: gate names, bench methods, every sweep grid point
    for_run / for_sweep / for_bench:
               the machine checked for it (ragmem.run.environment: tracking store, ragmem home, agent
               targets, key variables), the baseline run read (max_regression gates), the data
               loaded and validated (a sweep's once per distinct data setting), a --resume run's
               journal matched; all of it before the first agent or LLM call and before Prefect
               starts

The typed result (:class:`Prepared`) is handed down: to the engine directly (the Python API), or
to the flow the command starts, by a one-use token among the flow's parameters
(:func:`hand_over`, :func:`take`). A flow given no token (a scheduled run of ``ragmem serve``)
prepares its own run the same way. Nothing is cached between runs: each preparation reads the
files and the baseline afresh.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ragmem.config import secrets
from ragmem.config.loading import resolve_settings, RunConfig
from ragmem.data.loaders import Dataset
from ragmem.errors import ConfigError, RagmemError
from ragmem.memory import bench_data, layers as memory_layers
from ragmem.metrics import names, needs
from ragmem.memory.locomo import Conversation
from ragmem.run import environment, gates, pipeline, racing, resume as resumes, sweep as sweeps, traffic, windows
from ragmem.run.summary import check_param_sizes
from ragmem.runtime.forking import release_freed_memory
from ragmem.runtime.home import project_root
from ragmem.tracking import runs as compare

__all__ = ["Prepared", "SweepPlan", "resolve", "sweep_plan", "for_run", "for_sweep", "for_bench",
           "read_baseline", "hand_over", "take", "drop"]


@dataclass
class SweepPlan:
    """A sweep made ready: its spec, every grid point with the configuration it makes, and the data
    of each distinct data setting, loaded once."""

    spec: sweeps.SweepSpec
    base: dict[str, Any]                     # the config without its sweep section, as plain data
    points: list[dict[str, Any]]
    configs: list[RunConfig]
    datasets: dict[tuple, Dataset]

    def load(self) -> None:
        """Load and validate the data of each distinct data setting, once."""
        for child in self.configs:
            if tuple(child.files) not in self.datasets:
                self.datasets[tuple(child.files)] = pipeline.load(child)


@dataclass
class Prepared:
    """A run made ready: what the engine needs besides the steps."""

    config: RunConfig
    dataset: Dataset | None = None             # ragmem run: the data, loaded and validated
    baseline: pd.DataFrame | None = None       # the baseline run's per-example table (max_regression gates)
    sweep: SweepPlan | None = None             # ragmem sweep
    conversations: list[Conversation] | None = None  # ragmem bench-memory: its dataset, read
    resume: str | None = None

    @property
    def planned(self) -> SweepPlan:
        """The sweep's plan (a run made ready by :func:`for_sweep` has one)."""
        if self.sweep is None:
            raise RuntimeError("not a sweep: prepare.for_sweep plans one")  # (a caller's mistake)
        return self.sweep


def home_config() -> Path | None:
    """The config a run uses when none is named: the home's ``ragmem.yaml`` (the one ``ragmem init``
    writes, which ``ragmem run ragmem.yaml`` reads), else ``None`` (every default). The Python API
    takes it (``ragmem.evaluate(data)``): on the same data and home the API and the command line give
    the same numbers."""
    found = project_root() / "ragmem.yaml"
    return found if found.is_file() else None


def resolve(path: str | Path | None = None, overrides: list[str] | None = None, data: str | None = None,
            extra: dict[str, Any] | None = None, named: dict[str, Any] | None = None) -> RunConfig:
    """The run's settings, validated once (:func:`ragmem.config.loading.resolve_settings`), with what one
    section's schema cannot see: every gated metric exists, every bench method is known. (Every sweep
    grid point is checked by the ``for_*`` that follows: :func:`sweep_plan`.)"""
    cfg = resolve_settings(path, overrides=overrides, data=data, extra=extra)
    if cfg.run_name is None:  # (MLflow would make one up: languid-snipe-133)
        cfg = cfg.model_copy(update={"run_name": default_run_name(path, overrides or [], data, named)})
    gates.check_names(cfg.gates, cfg.ks, cfg.metrics.custom_names)
    check_param_sizes(cfg)
    names = [spec.name for spec in memory_layers.method_specs(cfg.bench.methods)]
    if cfg.bench.baseline is not None and cfg.bench.baseline not in names:
        raise ConfigError(f"bench.baseline: {cfg.bench.baseline!r} is not one of bench.methods ({', '.join(map(str, names))})")
    return cfg


def default_run_name(path: str | Path | None, overrides: list[str], data: str | None,
                     given: dict[str, Any] | None = None) -> str:
    """A run's name when the config gives none (``run_name``): what the run was started from and what
    was changed for it: the config file's name (``python-api`` without one), each ``--set`` (or the
    Python API's keyword settings, ``given``) but where the run is stored, and the ``--data`` file; a
    secret's value, and a URL's password, masked.

    >>> default_run_name("configs/demo.yaml", ["judge.threshold=0.5", "agent.params.api_key=s3"], "d/x.jsonl")
    'demo judge.threshold=0.5 agent.params.api_key=*** data=x.jsonl'
    >>> default_run_name(None, [], None, {"judge": {"threshold": 0.6}, "experiment": "nightly"})
    'python-api judge.threshold=0.6'
    """
    changed = list(overrides)
    stack = [("", v) for v in [given or {}]]
    while stack:
        prefix, value = stack.pop(0)
        if isinstance(value, dict):
            stack[:0] = [(f"{prefix}{k}.", v) for k, v in value.items()
                         if f"{prefix}{k}" not in ("experiment", "data", "tracking", "run_name")]
        elif prefix:
            plain = isinstance(value, list) and all(isinstance(v, (int, float, str)) for v in value)
            shown = ",".join(map(str, value)) if plain else value if isinstance(value, (int, float, str)) else type(value).__name__
            changed.append(f"{prefix[:-1]}={shown}")
    masked = [f"{k}=***" if secrets.is_secret(k.rsplit(".", 1)[-1]) else f"{k}={secrets.mask_url(v) if '://' in v else v}"
              for k, _, v in (c.partition("=") for c in changed)
              if k.split(".")[0] not in ("tracking", "experiment", "run_name")]
    name = " ".join([Path(path).stem if path else "python-api", *masked, *([f"data={Path(data).name}"] if data else [])])
    name = secrets.scrub(name)  # (a secret inside a value: agent.params.options={accessToken: ...})
    return name if len(name) <= 250 else name[:249] + "…"


def sweep_plan(cfg: RunConfig, load: bool = True) -> SweepPlan:
    """The sweep's spec, the config without its sweep section, every grid point with the
    configuration it makes (a bad value in the grid fails here, naming the point, not in the middle
    of a sweep) and, unless ``load=False``, the data of each distinct data setting."""
    spec = sweeps.parse_sweep(cfg.sweep)
    base = {k: v for k, v in cfg.raw.items() if k != "sweep"}
    points, configs = zip(*sweeps.point_configs(base, spec, cfg.seed))
    sweeps.share_retrievals(configs)
    plan = SweepPlan(spec, base, list(points), list(configs), {})
    if spec.races or spec.method == "tpe":
        racing.check(plan)
    if load:
        plan.load()
    return plan


def read_baseline(cfg: RunConfig) -> pd.DataFrame | None:
    """The baseline run's per-example table, when a ``max_regression`` gate needs it (``None``
    otherwise); a baseline that is not in the tracking store, or has no table, is a ConfigError."""
    if not (cfg.baseline and any(g.max_regression is not None for g in cfg.gates.values())):
        return None
    return compare.read_baseline(cfg.tracking_uri, cfg.baseline)


def for_run(cfg: RunConfig, *, resume: str | None = None, load: bool = True, claim: bool = True,
            scheduled: bool = False) -> Prepared:
    """An evaluation made ready (``load=False``: the machine checked, no data read). A config with a
    sweep grid has its grid points checked too (whichever command runs it). ``claim``: an incremental
    traces window is claimed until its run ends (:mod:`ragmem.run.windows`; given back here should the
    preparation fail); false when nothing will be judged (``ragmem serve``'s check, a dry run);
    ``scheduled`` (a flow run of ``ragmem serve``): a window held by another run is waited for."""
    if cfg.sweep.grid:
        sweep_plan(cfg, load=False)
    environment.check(cfg)
    baseline = read_baseline(cfg)
    resume = resumes.resolve_key(resume) if resume else None  # a unique prefix, as compare takes it
    # one incremental window at a time: claimed before its watermark is read, held until its run ends
    # (ragmem.run.engine), given back should the preparation raise
    wait_s = windows.SCHEDULED_WAIT_S if scheduled else 0.0
    with windows.claimed(cfg, wait_s) if load and claim else contextlib.nullcontext():
        if load:  # data.traces: read into a data file, the window fixed
            cfg, resume = traffic.as_data(cfg, resume)
        dataset = pipeline.load(cfg) if load else None
        release_freed_memory()  # the files' parse: what glibc keeps of it (about 25 MB at 10k examples)
        orchestration = cfg.orchestration
        if dataset is not None and dataset.streamed and orchestration.task_runner == "dask" and orchestration.dask_address:
            environment.check_dask_workers(orchestration.dask_address, [f.path for f in dataset.files], len(dataset))
        given = cfg.metrics.given  # (a default changed below is not a selection given)
        cfg = conversation_defaults(reference_free_defaults(cfg, dataset), dataset, given)
        if resume and dataset is not None:
            resumes.check_resume(cfg, dataset, resume).close()
        return Prepared(cfg, dataset, baseline, resume=resume)


def reference_free_defaults(cfg: RunConfig, dataset: Dataset | None) -> RunConfig:
    """A dataset in which no example has a reference answer (production traffic), with ``metrics``
    left to its default: the metrics that need none (:func:`ragmem.metrics.needs.reference_free`),
    said in a note of the run (``cfg._chosen``). A selection given in the config is kept as it is."""
    if dataset is None or dataset.with_reference != 0 or cfg.metrics.given:
        return cfg
    chosen = needs.reference_free(cfg.metrics.names, cfg.ks, gold=bool(dataset.with_gold))
    if chosen == cfg.metrics.names:
        return cfg
    adjusted = cfg.model_copy(update={"metrics": cfg.metrics.with_names(chosen)})
    adjusted._chosen = "; ".join(filter(None, [cfg._chosen, (
        f"no example has a reference answer: the metrics that need none by default "
        f"({len(chosen)} of {len(cfg.metrics.names)}; metrics: in the config selects others)")]))
    return adjusted


def conversation_defaults(cfg: RunConfig, dataset: Dataset | None, given: bool) -> RunConfig:
    """A dataset whose examples include turns of a conversation (``history``), with ``metrics`` left
    to its default: the conversation's metrics added (:data:`ragmem.metrics.names.CONVERSATION`), said
    in a note of the run. A selection ``given`` in the config is kept as it is."""
    if dataset is None or not dataset.with_history or given:
        return cfg
    added = [n for n in names.CONVERSATION.selectable if n not in cfg.metrics]
    if not added:
        return cfg
    adjusted = cfg.model_copy(update={"metrics": cfg.metrics.with_names([*cfg.metrics.names, *added])})
    adjusted._chosen = "; ".join(filter(None, [cfg._chosen, (
        f"{dataset.with_history:,} examples are turns of a conversation (history): {', '.join(added)} added")]))
    return adjusted


def for_sweep(cfg: RunConfig, *, resume: str | None = None) -> Prepared:
    """A sweep made ready: every point's configuration and every distinct data setting's data."""
    plan = sweep_plan(cfg, load=False)
    environment.check(cfg)
    resume = resumes.resolve_key(resume) if resume else None
    plan.load()
    return Prepared(cfg, sweep=plan, resume=resume)


def bench_defaults(cfg: RunConfig) -> RunConfig:
    """``cfg`` with what a generated suite's data defaults to (the lifecycle suite: the run's seed)."""
    if bench_data.dataset(cfg.bench.dataset).generated and not cfg.bench.data:
        return cfg.model_copy(update={"bench": cfg.bench.model_copy(update={"data": f"seed:{cfg.seed}"})})
    return cfg


def for_bench(cfg: RunConfig) -> Prepared:
    """A memory benchmark made ready: the machine checked and the data of ``bench.dataset`` read (a
    malformed file fails here, naming the file, the conversation or question and the field)."""
    cfg = bench_defaults(cfg)
    data = bench_data.dataset(cfg.bench.dataset)
    if not cfg.bench.data:
        raise ConfigError(f"bench.data: no {data.title} data given; pass --data PATH or set bench.data in the config")
    if cfg.sweep.grid:
        sweep_plan(cfg, load=False)
    environment.check(cfg)
    return Prepared(cfg, conversations=data.load(str(cfg.bench.data)))


# ---- the hand-over to a flow ---------------------------------------------------------------------

_HANDED: dict[str, Prepared] = {}
_LOCK = threading.Lock()


def hand_over(prepared: Prepared) -> str:
    """A one-use token for ``prepared``, for the flow the command starts in this process (its
    parameters go to the Prefect API: the token does, the data does not)."""
    token = uuid.uuid4().hex
    with _LOCK:
        _HANDED[token] = prepared
    return token


def take(token: str) -> Prepared:
    """The prepared run behind ``token``, once; a token not handed over in this process is an error."""
    with _LOCK:
        prepared = _HANDED.pop(token, None)
    if prepared is None:
        raise RagmemError(f"no prepared run {token!r} was handed over in this process")
    return prepared


def drop(token: str) -> None:
    """Forget a token the flow did not take (it failed before its first step)."""
    with _LOCK:
        _HANDED.pop(token, None)
