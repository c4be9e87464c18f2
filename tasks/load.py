"""Load and validate the dataset."""

from __future__ import annotations

import logging

from prefect import task
from prefect.cache_policies import NO_CACHE

from ragmem import pipeline
from ragmem.config import RunConfig
from ragmem.loaders import Dataset

log = logging.getLogger("ragmem")


@task(name="load", cache_policy=NO_CACHE)
def load_examples(cfg: RunConfig) -> Dataset:
    """Read every configured file; a bad record fails the run with file, record and field."""
    dataset = pipeline.load(cfg)
    log.info("loaded %d examples from %d file(s)", len(dataset), len(dataset.files))
    return dataset
