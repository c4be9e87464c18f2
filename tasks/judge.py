"""Judge one batch of answered examples."""

from __future__ import annotations

from typing import Sequence

from prefect import task
from prefect.cache_policies import NO_CACHE

from ragmem import pipeline
from ragmem.judges import Judge, Judgement
from ragmem.schema import AgentOutput, Example


@task(name="judge", cache_policy=NO_CACHE, task_run_name="judge-batch-{batch_index}")
def judge_batch(judge: Judge, examples: Sequence[Example], outputs: Sequence[AgentOutput],
                batch_index: int) -> list[Judgement | None]:
    """One judgement per example (None where the agent call failed)."""
    return pipeline.judge(judge, examples, outputs)
