"""Time the agent on one batch of examples; results are journaled as soon as the batch is done."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from prefect import task
from prefect.cache_policies import NO_CACHE

from ragmem import pipeline
from ragmem.config import RunConfig
from ragmem.schema import AgentOutput, Example

log = logging.getLogger("ragmem")


@task(name="time-agent", cache_policy=NO_CACHE, task_run_name="time-agent-batch-{batch_index}")
def time_agent(agent: Any, examples: Sequence[Example], cfg: RunConfig, batch_index: int,
               journal: Path | None = None) -> list[AgentOutput]:
    """Call (or replay) the agent for each example of the batch, timed, failures recorded."""
    outputs = pipeline.time_agent(agent, examples, cfg)
    if journal is not None:
        with open(journal, "a", encoding="utf-8") as out:
            for output in outputs:
                out.write(json.dumps(asdict(output), ensure_ascii=False) + "\n")
    return outputs
