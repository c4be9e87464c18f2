"""The evaluation flow: load -> time the agent -> judge -> metrics -> log to MLflow.

The order of the steps and the MLflow run's lifecycle live in :func:`ragmem.run.engine.evaluate`; this
flow runs each step as a Prefect task (:class:`ragmem.tasks.steps.PrefectSteps`).
"""

from __future__ import annotations

import uuid
from typing import Any

from prefect import flow, get_run_logger
from prefect.runtime import flow_run
from prefect.states import Failed

from ragmem.config import secrets as masking
from ragmem.config.loading import RunConfig
from ragmem.flows.runners import task_runner_for
from ragmem.orchestration import notify
from ragmem.orchestration.prefect_api import work_done
from ragmem.run import alerting, drift, engine, gates, prepare, traffic
from ragmem.runtime import interrupts
from ragmem.tasks.steps import PrefectSteps


def _run_name(parameters: dict[str, Any]) -> str:
    config = parameters["config"]  # resolved: every setting present
    return config["run_name"] or f"{config['experiment']}-{uuid.uuid4().hex[:6]}"


@flow(name="ragmem-evaluate", flow_run_name=lambda: _run_name(flow_run.parameters),
      validate_parameters=False)
def evaluate_flow(config: dict[str, Any], resume: str | None = None, preflight: bool = True,
                  prepared: str | None = None) -> Any:  # (the summary, or a Failed state with it)
    """Evaluate one configuration (or ``resume`` an interrupted run of it) and return the summary
    (see README: summary JSON). ``prepared``: the token of the run the command made ready
    (:mod:`ragmem.run.prepare`); without one (a scheduled run) the flow prepares it."""
    # (a run the command made ready is taken as it is: its config already holds its data)
    cfg = None if prepared else RunConfig.from_dict(masking.restore(config))  # the secrets masked in the parameters
    try:
        ready = prepare.take(prepared) if prepared else prepare.for_run(cfg, resume=resume, scheduled=True)  # type: ignore[arg-type]
    except traffic.NoTraces as nothing:  # a scheduled window with no new traffic: nothing to do, not a failure
        get_run_logger().info("%s: nothing to evaluate", nothing)
        return {"n_examples": 0, "notes": [str(nothing)]}
    except Exception as exc:  # a window that could not start: said to alerts.to (run_failed)
        if cfg is not None:
            notify.deliver(cfg.alerts.to, alerting.run_failed(cfg, exc))
        raise
    try:
        with interrupts.kept_under("prefect"):  # Prefect's SIGTERM handler: the signal still kept
            result = engine.evaluate(ready.config, PrefectSteps(), dataset=ready.dataset, baseline=ready.baseline,
                                     resume=ready.resume, preflight=preflight,
                                     tags={"ragmem.entry": "flow", "prefect.flow_run_id": str(flow_run.id)})
    except Exception as exc:  # (an interruption is not a failure to alert on)
        notify.deliver(ready.config.alerts.to, alerting.run_failed(ready.config, exc))
        raise
    work_done(result.summary)  # complete now, whatever happens to the Prefect API from here on
    for line in alerting.headline(result.summary) if not prepared else []:  # a scheduled run's log: the window
        get_run_logger().info(line)
    notify.deliver(ready.config.alerts.to, alerting.messages(ready.config, result.summary))
    for line in drift.undetectable_lines(ready.config, (result.summary.get("traces") or {}).get("volume") or {}):
        get_run_logger().warning(line)
    failed = [gates.GateResult(**g) for g in result.summary.get("gates", []) if not g["passed"]]
    if failed and not prepared:  # a scheduled run: the flow run Failed, with the reason, for Prefect to act on
        return Failed(message="; ".join(g.line() for g in failed), data=result.summary)
    return result.summary


def evaluate_flow_for(config: dict[str, Any]):
    """The evaluate flow on the task runner of ``orchestration.task_runner``."""
    return evaluate_flow.with_options(task_runner=task_runner_for(config))


def run_evaluate(config: dict[str, Any], resume: str | None = None, preflight: bool = True,
                 prepared: str | None = None) -> dict[str, Any]:
    """Run the evaluate flow (:func:`evaluate_flow_for`)."""
    return evaluate_flow_for(config)(config, resume=resume, preflight=preflight, prepared=prepared)
