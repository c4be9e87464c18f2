"""Scheduled runs: serve the evaluate or sweep flow as a Prefect deployment with a cron schedule.

``flow.serve`` creates (or updates) the deployment on the Prefect server and then runs every
scheduled (or manually triggered) flow run in a subprocess, until it is stopped. Paths in the
parameters are made absolute, so a scheduled run writes to the same MLflow store as a manual run
from this folder.
"""

from __future__ import annotations

import copy
import os
from typing import Any, Callable

from ragmem.config import secrets as masking
from ragmem.config.loading import RunConfig
from ragmem.errors import ConfigError
from ragmem.orchestration.prefect_api import prefect_context
from ragmem.orchestration.server import QUIET_ENV
from ragmem.runtime.home import ragmem_home


def absolute_paths(config: dict[str, Any]) -> dict[str, Any]:
    """The config with the tracking store, artifact root and data paths as absolute paths."""
    config = copy.deepcopy(config)
    cfg = RunConfig.from_dict(config)
    config["tracking"]["uri"] = cfg.tracking_uri  # the home's store, whatever the worker's directory
    config["tracking"]["artifact_root"] = cfg.artifact_root
    for item in config["data"]["files"]:
        if isinstance(item, dict):
            item["path"] = os.path.abspath(item["path"])
    return config


def pick_flow(config: dict[str, Any], flow_kind: str):
    if flow_kind not in ("auto", "evaluate", "sweep"):
        raise ConfigError(f"--flow: expected evaluate, sweep or auto, got {flow_kind!r}")
    is_sweep = flow_kind == "sweep" or (flow_kind == "auto" and bool(config["sweep"]["grid"]))
    if is_sweep:
        from ragmem.flows.sweep import sweep_flow_for  # slow import (Prefect): --flow is checked first

        return sweep_flow_for(config)
    from ragmem.flows.evaluate import evaluate_flow_for  # slow import (Prefect)

    return evaluate_flow_for(config)


def schedule_for(cron: str, timezone: str):
    """The Prefect schedule, or one line naming what is wrong with ``--cron`` or ``--timezone``
    (checked before the Prefect server is started)."""
    import zoneinfo

    from prefect.schedules import Cron

    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"--timezone: {timezone!r} is not an IANA time zone (for example UTC, Europe/Berlin, "
                          f"America/New_York)") from None
    try:
        return Cron(cron, timezone=timezone)
    except Exception as exc:
        raise ConfigError(f"--cron: {cron!r} is not a valid cron schedule ({str(exc).splitlines()[0]})") from None


def serve_flow(config: dict[str, Any], cron: str, name: str | None, flow_kind: str, timezone: str,
               api_url: str, log: Callable[[str], None] = print) -> None:
    schedule = schedule_for(cron, timezone)
    # the served runs execute in subprocesses: they read these from the environment
    os.environ.update({**QUIET_ENV, "PREFECT_API_URL": api_url, "RAGMEM_HOME": str(ragmem_home())})
    # secrets masked in the deployment's parameters; the runs' subprocesses inherit them (ragmem.config.secrets)
    config = absolute_paths(config)
    if config["data"]["traces"]["experiment"]:  # production traffic: each run the traces that arrived since the last
        config["data"]["traces"]["incremental"] = True  # window (ragmem.run.windows)
        log(f"each run evaluates the traces of experiment {config['data']['traces']['experiment']!r} that arrived "
            f"since the last window ended (the first window: data.traces.since {config['data']['traces']['since']})")
        from ragmem.run import drift  # (the tracking store, read only to serve a traces config)

        for note in drift.served_notes(RunConfig.from_dict(config)):
            log(f"note: {note}")
    parameters = {"config": masking.protect(config)}
    flow = pick_flow(config, flow_kind)
    deployment = name or config["experiment"]
    log(f"serving {flow.name}/{deployment} on '{cron}' ({timezone}) at {api_url}; "
        f"trigger a run now with: ragmem trigger {deployment}; Ctrl+C to stop")
    with prefect_context(api_url, quiet=False):
        # (served: its schedule active; stopped, by Ctrl+C or SIGTERM: paused, so no run is scheduled that
        # nothing serves; served again: active again)
        flow.serve(name=deployment, schedule=schedule, parameters=parameters, paused=False, pause_on_shutdown=True,
                   print_starting_message=False, limit=1)


def _with_client(api_url: str, go: Callable[[Any, Callable[[Any], Any]], Any]) -> Any:
    """``go(client, label)`` run against the Prefect server at ``api_url``; ``label(deployment)`` gives
    a deployment's ``FLOW/NAME`` (each flow's name read once)."""
    import asyncio  # (the Prefect client: only the commands that reach a deployment)

    from prefect.client.orchestration import get_client

    async def run():
        async with get_client() as client:
            flows: dict = {}

            async def label(d) -> str:
                if d.flow_id not in flows:
                    flows[d.flow_id] = (await client.read_flow(d.flow_id)).name
                return f"{flows[d.flow_id]}/{d.name}"

            return await go(client, label)

    with prefect_context(api_url):
        return asyncio.run(run())


def _on_deployment(name: str, api_url: str, verb: str, act: Callable[[Any, Any], Any]) -> tuple[str, Any]:
    """``act(client, deployment)`` on the deployment ``name`` (``NAME`` or ``FLOW/NAME``); its label
    ``FLOW/NAME`` and what ``act`` returned. One that is not there (or not one) is a ConfigError naming
    the deployments there are."""
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    wanted = name.split("/", 1)[-1]

    async def go(client, label):
        found = await client.read_deployments(deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=[wanted])))
        full = [(await label(d), d) for d in found]
        matches = [(n, d) for n, d in full if n == name or "/" not in name]
        if len(matches) != 1:
            every = [await label(d) for d in await client.read_deployments()]
            why = "no deployment" if not matches else "more than one deployment"
            raise ConfigError(f"{verb} {name!r}: {why} of that name at {api_url}; deployments: "
                              f"{', '.join(sorted(every)) or '(none: start one with ragmem serve)'}")
        label_, deployment = matches[0]
        return label_, await act(client, deployment)

    return _with_client(api_url, go)


def trigger(name: str, api_url: str) -> tuple[str, str, str]:
    """Start a run of the served deployment ``name`` (``NAME`` or ``FLOW/NAME``) now; the ``ragmem
    serve`` process that serves it runs it. Returns (deployment, flow run name, flow run id)."""
    async def run(client, deployment):
        started = await client.create_flow_run_from_deployment(deployment.id)
        return started.name, str(started.id)

    label, (run_name, run_id) = _on_deployment(name, api_url, "trigger", run)
    return label, run_name, run_id


def unserve(name: str, api_url: str) -> str:
    """Remove the deployment ``name`` from the Prefect server (its schedule and its future runs with it;
    the runs it made stay). Returns its label ``FLOW/NAME``."""
    async def remove(client, deployment):
        await client.delete_deployment(deployment.id)

    return _on_deployment(name, api_url, "unserve", remove)[0]


def deployments(api_url: str) -> list[dict[str, Any]]:
    """Every deployment on the Prefect server at ``api_url``: its label ``FLOW/NAME``, its schedules
    (cron and whether active), whether it is paused, its next scheduled run and its last run's state
    (``ragmem server status``)."""
    from prefect.client.schemas.filters import (DeploymentFilter, DeploymentFilterId, FlowRunFilter, FlowRunFilterState,
                                                FlowRunFilterStateType)
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort

    scheduled = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.SCHEDULED])))
    ended = FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(
        any_=[StateType.COMPLETED, StateType.FAILED, StateType.CRASHED, StateType.CANCELLED])))

    async def go(client, label):
        out = []
        for d in sorted(await client.read_deployments(), key=lambda d: d.name):
            mine = DeploymentFilter(id=DeploymentFilterId(any_=[d.id]))
            upcoming = await client.read_flow_runs(deployment_filter=mine, flow_run_filter=scheduled,
                                                   sort=FlowRunSort.EXPECTED_START_TIME_ASC, limit=1)
            last = await client.read_flow_runs(deployment_filter=mine, flow_run_filter=ended,
                                               sort=FlowRunSort.EXPECTED_START_TIME_DESC, limit=1)
            out.append({"name": await label(d), "paused": bool(d.paused),
                        "schedules": [{"cron": getattr(s.schedule, "cron", None) or str(s.schedule),
                                       "timezone": getattr(s.schedule, "timezone", None), "active": bool(s.active)}
                                      for s in d.schedules],
                        "next": upcoming[0].expected_start_time if upcoming and not d.paused else None,
                        "last": (last[0].state_type.value, last[0].end_time or last[0].expected_start_time) if last else None})
        return out

    return _with_client(api_url, go)
