"""The sweep flow: one parent MLflow run, one child run per configuration, evaluated in parallel.

The sweep itself lives in :func:`ragmem.run.engine.sweep`; here the children run as Prefect tasks on a
thread pool of ``sweep.max_parallel`` workers, or on Dask (``orchestration.task_runner: dask``).
"""

from __future__ import annotations

import uuid
from typing import Any

from prefect import flow
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner

from ragmem.config import secrets as masking
from ragmem.config.loading import RunConfig
from ragmem.flows.runners import task_runner_for
from ragmem.orchestration.prefect_api import work_done
from ragmem.run import engine, prepare
from ragmem.runtime import interrupts
from ragmem.run.sweep import expand, parse_sweep
from ragmem.tasks.steps import PrefectSteps


def _run_name(parameters: dict[str, Any]) -> str:
    config = parameters["config"]  # resolved: every setting present
    return config["run_name"] or f"sweep-{config['experiment']}-{uuid.uuid4().hex[:6]}"


@flow(name="ragmem-sweep", flow_run_name=lambda: _run_name(flow_run.parameters), validate_parameters=False,
      task_runner=ThreadPoolTaskRunner(max_workers=2))  # type: ignore[arg-type]  # (Prefect's generic runner)
def sweep_flow(config: dict[str, Any], preflight: bool = True, resume: str | None = None,
               prepared: str | None = None) -> dict[str, Any]:
    """Evaluate every configuration of the sweep grid and pick the best one (``prepared``: the token
    of the sweep the command made ready; without one the flow prepares it)."""
    ready = prepare.take(prepared) if prepared else prepare.for_sweep(RunConfig.from_dict(masking.restore(config)))
    with interrupts.kept_under("prefect"):  # Prefect's SIGTERM handler: the signal still kept
        result = engine.sweep(ready.config, PrefectSteps(), plan=ready.sweep, preflight=preflight, resume=resume,
                              tags={"prefect.flow_run_id": str(flow_run.id)})
    work_done(result)  # complete now, whatever happens to the Prefect API from here on
    return result


def sweep_flow_for(config: dict[str, Any]):
    """The sweep flow with ``sweep.max_parallel`` children at a time (on threads), or its children
    on Dask (``orchestration.task_runner: dask``)."""
    spec = parse_sweep(config["sweep"])
    # a race's children all start (they wait for each other batch by batch); max_parallel of them work at once
    threads = len(expand(spec, config.get("seed", 0))) if spec.races else spec.max_parallel
    return sweep_flow.with_options(task_runner=task_runner_for(config, threads=threads))


def run_sweep(config: dict[str, Any], preflight: bool = True, resume: str | None = None,
              prepared: str | None = None) -> dict[str, Any]:
    """Run the sweep flow (:func:`sweep_flow_for`)."""
    return sweep_flow_for(config)(config, preflight=preflight, resume=resume, prepared=prepared)
