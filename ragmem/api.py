"""The Python API for notebooks and pytest: the run engine's steps as plain calls, without Prefect.

>>> import ragmem
>>> result = ragmem.evaluate("data.json", track=False, judge={"threshold": 0.6})  # doctest: +SKIP
>>> result.metrics["f1"], result.table[["id", "verdict"]]                       # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragmem.data import given
from ragmem.errors import ConfigError
from ragmem.runtime import targets
from ragmem.run import engine, prepare
from ragmem.run.engine import EvaluationResult

__all__ = ["evaluate", "dry_run", "EvaluationResult"]


def evaluate(data: Any = None, config: str | Path | dict | None = None, *, agent: Any = None, track: bool = True,
             resume: str | None = None, preflight: bool = True, journal: bool | None = None,
             **overrides: Any) -> EvaluationResult:
    """Evaluate a dataset and (unless ``track=False``) record the run in MLflow.

    ``data``: a dataset file, a list of ``{path, label?}`` entries, or the records themselves: a list
    of dicts, a pandas DataFrame, a pyarrow Table or any iterable of records (checked as a file's
    records are, and named ``the records given to ragmem.evaluate`` in messages). ``agent``: a
    function (or ``async`` function, or object with ``__call__``) that takes the query and returns
    the answer (``{"answer", "contexts"}``, or text), as ``agent.type: python``; or a dict of agent
    settings. ``config``: a YAML file or a dict of settings; without one, the home's ``ragmem.yaml``
    when it has one, as ``ragmem run ragmem.yaml`` reads it (:func:`ragmem.run.prepare.home_config`).
    Keyword arguments override top-level settings (``judge={"threshold": 0.5}``, ``metrics=["f1"]``,
    ``experiment="nightly"``); ``metrics={"custom": [my_check]}`` adds metrics of one's own given as
    functions (:mod:`ragmem.metrics.custom`). The run is the same as ``ragmem run``'s: same steps, same artifacts
    (the journal included), equal metrics. ``resume`` continues an interrupted run by its id or a
    unique prefix of it (see ``ragmem run --resume``); ``preflight=False`` skips checking the
    endpoints before the first call. ``journal``: keep the run's journal of agent outputs in
    ``$RAGMEM_HOME/runs/`` once it has ended well (default: when the run is tracked; an untracked run
    leaves nothing behind unless ``journal=True``; a run that stopped keeps it for its resume).
    """
    ready = _prepared(data, config, track, {**overrides, **({"agent": agent} if agent is not None else {})}, resume)
    return engine.evaluate(ready.config, dataset=ready.dataset, baseline=ready.baseline,
                           tags={"ragmem.entry": "python-api"}, resume=ready.resume, preflight=preflight,
                           keep_journal=track if journal is None else journal)


def dry_run(data: str | Path | list[dict[str, Any]] | None = None, config: str | Path | dict | None = None,
            *, resume: str | None = None, preflight: bool = True, **overrides: Any):
    """What ``evaluate`` with the same arguments would ask of its LLM and embedding endpoints, the
    cached share and the estimated cost, without sending anything (``ragmem run --dry-run``):
    a :class:`ragmem.run.dryrun.DryRun`."""
    from ragmem.run import dryrun  # (the memory benchmarks' data and the reference agent: a dry run's alone)

    name = str(config) if isinstance(config, (str, Path)) else "the Python API's settings"
    ready = _prepared(data, config, False, overrides, resume)
    return dryrun.dry_run(ready.config, name, dataset=ready.dataset, resume=ready.resume, preflight=preflight)


def _own_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """``metrics`` with its own metrics given as callables named as targets in this process:
    ``metrics={"custom": [my_check]}`` (named by the function) or ``[{"name": ..., "target": my_check}]``."""
    own = []
    for i, entry in enumerate(metrics.get("custom") or []):
        if callable(entry):
            entry = {"name": getattr(entry, "__name__", type(entry).__name__), "target": entry}
        if isinstance(entry, dict) and callable(entry.get("target")):
            entry = {**entry, "target": targets.give(entry["target"], f"metrics.custom[{i}].target", ConfigError)}
        own.append(entry)
    return {**metrics, "custom": own} if "custom" in metrics else metrics


def _prepared(data, config, track: bool, overrides: dict[str, Any], resume: str | None) -> prepare.Prepared:
    """The run made ready as ``ragmem run`` makes it (:mod:`ragmem.run.prepare`)."""
    extra = dict(overrides)
    agent = extra.get("agent")
    if agent is not None and not isinstance(agent, dict):  # a function as the agent
        extra["agent"] = {"type": "python", "target": targets.give(agent)}
    if isinstance(config, dict):
        extra = {**config, **extra}
        config = None
    elif config is None:
        config = prepare.home_config()  # the home's ragmem.yaml, as the command line reads it
    if isinstance(extra.get("metrics"), dict):
        extra["metrics"] = _own_metrics(extra["metrics"])
    data_path = None
    if given.is_records(data):
        data_path = str(given.records_file(data))
    elif isinstance(data, list):
        extra.setdefault("data", {})["files"] = data
    elif data is not None:
        data_path = str(data)
    if not track:
        extra["tracking"] = {**(extra.get("tracking") or {}), "enabled": False}
    named = {**overrides, **({"agent": getattr(agent, "__name__", type(agent).__name__)} if callable(agent) else {})}
    return prepare.for_run(prepare.resolve(config, data=data_path, extra=extra, named=named), resume=resume)
