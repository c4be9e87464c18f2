"""The metrics: :mod:`ragmem.metrics.registry` (the families, which names exist, and the functions
that compute a selection) is what ``ragmem.metrics`` exports, loaded on first use.

Loaded lazily so that importing one kernel module (:mod:`ragmem.metrics.scorer`,
:mod:`ragmem.metrics.kernels`, as each scoring worker of :mod:`ragmem.runtime.parallel` does) does not load
every family with pandas and numpy: about 90 MB in each worker process.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FAMILIES", "DEFAULT_METRICS", "RELEVANCE_MODES", "MetricContext", "MetricResult", "aggregators",
           "compute_metrics", "expand_selection", "reads_context_keywords", "start_metrics"]


def __getattr__(name: str) -> Any:
    if name in __all__ or name in ("Aggregator", "Family"):
        from ragmem.metrics import registry  # slow import: the families load pandas (not in the scoring workers)

        return getattr(registry, name)
    raise AttributeError(f"module 'ragmem.metrics' has no attribute {name!r}")
