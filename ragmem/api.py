"""The Python API for notebooks and pytest: the run engine's steps as plain calls, without Prefect.

>>> import ragmem
>>> result = ragmem.evaluate("data.json", track=False, judge={"threshold": 0.6})  # doctest: +SKIP
>>> result.metrics["f1"], result.table[["id", "verdict"]]                       # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragmem import engine, environment
from ragmem.config import RunConfig, resolve_config
from ragmem.engine import EvaluationResult

__all__ = ["evaluate", "dry_run", "EvaluationResult"]


def evaluate(data: str | Path | list[dict[str, Any]] | None = None, config: str | Path | dict | None = None,
             *, track: bool = True, resume: str | None = None, preflight: bool = True,
             **overrides: Any) -> EvaluationResult:
    """Evaluate a dataset and (unless ``track=False``) record the run in MLflow.

    ``data`` is a dataset file, or a list of ``{path, label?}`` entries; ``config`` a YAML file or a
    dict of settings; keyword arguments override top-level settings (``judge={"threshold": 0.5}``,
    ``metrics=["f1"]``, ``experiment="nightly"``). The run is the same as ``ragmem run``'s: same
    steps, same artifacts (the journal included), equal metrics. ``resume`` continues an
    interrupted run by its id (see ``ragmem run --resume``); ``preflight=False`` skips checking the
    endpoints before the first call.
    """
    cfg = _config(data, config, track, overrides)
    return engine.evaluate(cfg, tags={"ragmem.entry": "python-api"}, resume=resume, preflight=preflight)


def dry_run(data: str | Path | list[dict[str, Any]] | None = None, config: str | Path | dict | None = None,
            *, resume: str | None = None, preflight: bool = True, **overrides: Any):
    """What ``evaluate`` with the same arguments would ask of its LLM and embedding endpoints, the
    cached share and the estimated cost, without sending anything (``ragmem run --dry-run``):
    a :class:`ragmem.dryrun.DryRun`."""
    from ragmem import dryrun

    name = str(config) if isinstance(config, (str, Path)) else "the Python API's settings"
    return dryrun.dry_run(_config(data, config, False, overrides), name, resume=resume, preflight=preflight)


def _config(data, config, track: bool, overrides: dict[str, Any]) -> RunConfig:
    extra = dict(overrides)
    if isinstance(config, dict):
        extra = {**config, **extra}
        config = None
    data_path = None
    if isinstance(data, list):
        extra.setdefault("data", {})["files"] = data
    elif data is not None:
        data_path = str(data)
    resolved = resolve_config(config, data=data_path, extra=extra)
    if not track:
        resolved["tracking"]["enabled"] = False
    cfg = RunConfig.from_dict(resolved)
    cfg.require_data()
    environment.check(cfg)  # the tracking store and the ragmem home, before any work
    return cfg
