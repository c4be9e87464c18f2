"""Build the per-example table and compute the selected metrics."""

from __future__ import annotations

from typing import Sequence

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from ragmem import pipeline
from ragmem.config import RunConfig
from ragmem.judges import Judgement
from ragmem.metrics import MetricResult
from ragmem.schema import AgentOutput, Example


@task(name="metrics", cache_policy=NO_CACHE)
def compute_metrics(examples: Sequence[Example], outputs: Sequence[AgentOutput],
                    judgements: Sequence[Judgement | None], components: pipeline.Components,
                    cfg: RunConfig) -> tuple[pd.DataFrame, MetricResult]:
    """Per-example table with metric columns, and the aggregates (LLM metrics batched here)."""
    table = pipeline.build_table(examples, outputs, judgements, components.keywords)
    return pipeline.score(table, cfg, components)
