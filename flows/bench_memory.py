"""The memory benchmark flow: for every memory layer, ingest each conversation, answer its
questions, judge, score; one MLflow child run per layer under one parent (see
:func:`ragmem.run.engine.bench_memory`), each step a Prefect task."""

from __future__ import annotations

import uuid
from typing import Any

from prefect import flow
from prefect.runtime import flow_run

from ragmem.config import secrets as masking
from ragmem.config.loading import RunConfig
from ragmem.orchestration.prefect_api import work_done
from ragmem.run import engine, prepare
from ragmem.runtime import interrupts
from ragmem.tasks.steps import PrefectSteps


@flow(name="ragmem-bench-memory", validate_parameters=False,
      flow_run_name=lambda: flow_run.parameters["config"]["run_name"] or f"bench-memory-{uuid.uuid4().hex[:6]}")
def bench_memory_flow(config: dict[str, Any], preflight: bool = True, prepared: str | None = None) -> dict[str, Any]:
    """Memory layers compared on ``bench.dataset`` (LoCoMo or LongMemEval; see ragmem.memory.benchmark); ``prepared``:
    the token of the benchmark the command made ready (without one the flow prepares it)."""
    ready = prepare.take(prepared) if prepared else prepare.for_bench(RunConfig.from_dict(masking.restore(config)))
    with interrupts.kept_under("prefect"):  # Prefect's SIGTERM handler: the signal still kept
        result = engine.bench_memory(ready.config, PrefectSteps(), conversations=ready.conversations,
                                     preflight=preflight, tags={"prefect.flow_run_id": str(flow_run.id)})
    work_done(result)  # complete now, whatever happens to the Prefect API from here on
    return result
