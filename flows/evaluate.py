"""The evaluation flow: load -> time the agent -> judge -> metrics -> log to MLflow."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from prefect import flow
from prefect.runtime import flow_run
from prefect.utilities.annotations import quote

from ragmem import pipeline
from ragmem.config import RunConfig
from ragmem.orchestration import ragmem_home
from tasks.agent import time_agent
from tasks.judge import judge_batch
from tasks.load import load_examples
from tasks.metrics import compute_metrics
from tasks.track import fail_run, log_run, start_run

log = logging.getLogger("ragmem")


def _run_name(parameters: dict[str, Any]) -> str:
    config = parameters["config"]
    return config.get("run_name") or f"{config.get('experiment', 'ragmem')}-{uuid.uuid4().hex[:6]}"


@flow(name="ragmem-evaluate", flow_run_name=lambda: _run_name(flow_run.parameters),
      validate_parameters=False)
def evaluate_flow(config: dict[str, Any]) -> dict[str, Any]:
    """Evaluate one configuration and return the summary (see README: summary JSON)."""
    cfg = RunConfig.from_dict(config)
    components = pipeline.build_components(cfg)
    dataset = load_examples(cfg)
    run_id = start_run(cfg, {"ragmem.entry": "flow", "prefect.flow_run_id": str(flow_run.id)}) \
        if cfg.tracking_enabled else None
    try:
        journal = ragmem_home() / "runs" / (run_id or str(flow_run.id)) / "agent_outputs.jsonl"
        journal.parent.mkdir(parents=True, exist_ok=True)
        journal.unlink(missing_ok=True)

        outputs, judgements = [], []
        for i, batch in enumerate(pipeline.batches(dataset.examples, cfg.batch_size)):
            answered = time_agent(quote(components.agent), quote(batch), cfg, i, journal)
            judgements += judge_batch(quote(components.judge), quote(batch), quote(answered), i)
            outputs += answered
            log.info("agent + judge: %d/%d examples (%d agent errors)", len(outputs), len(dataset),
                     sum(o.error is not None for o in outputs))

        table, result = compute_metrics(quote(dataset.examples), quote(outputs), quote(judgements),
                                        quote(components), cfg)
        params = pipeline.run_params(cfg, dataset, components)
        summary = pipeline.summary(run_id, cfg, result, table, params)
        if run_id is not None:
            log_run(run_id, cfg, params, result, quote(table), summary, quote(dataset.examples),
                    quote(outputs), journal)
    except BaseException:
        if run_id is not None:
            fail_run(cfg, run_id)
        raise
    return summary
