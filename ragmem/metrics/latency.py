"""Latency statistics in seconds over the calls that were timed.

For the whole call: ``avg_latency`` (mean), ``latency_p50``, ``latency_p95``, ``latency_p99``
(numpy's linear-interpolation percentiles) and ``latency_max``; for each stage the agent reported
(``embed``, ``retrieve``, ``rerank``, ``llm``, ...): ``{stage}_latency_avg``, ``{stage}_latency_p50``,
``{stage}_latency_p95``, ``{stage}_latency_p99``, ``{stage}_latency_max``.

Failed calls that were timed count (a timeout is latency the user waited through). Latency that was
not measured (a replayed dataset without ``latency_ms``) is missing, never 0: when no call was timed
the metrics are ``None`` ("not measured") and ``n_latency_measured`` is 0.

>>> from ragmem.metrics.latency import latency_stats
>>> latency_stats([1.0, 2.0, 3.0, None])["latency_p50"]
2.0
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

NAMES = ("avg_latency", "latency_p50", "latency_p95", "latency_p99", "latency_max")
_SUFFIXES = {"avg_latency": "avg", "latency_p50": "p50", "latency_p95": "p95",
             "latency_p99": "p99", "latency_max": "max"}


def latency_stats(seconds: Iterable[float | None], prefix: str = "") -> dict[str, float | None]:
    """The five statistics of the measured values; ``None`` each when nothing was measured.

    With a ``prefix`` (a stage name) the names are ``{prefix}_latency_{avg,p50,p95,p99,max}``.
    """
    kept = np.array([s for s in seconds if s is not None and not math.isnan(s)], dtype=float)
    names = {n: (f"{prefix}_latency_{_SUFFIXES[n]}" if prefix else n) for n in NAMES}
    if kept.size == 0:
        return {names[n]: None for n in NAMES}
    p50, p95, p99 = np.percentile(kept, [50, 95, 99])
    values = {"avg_latency": kept.mean(), "latency_p50": p50, "latency_p95": p95,
              "latency_p99": p99, "latency_max": kept.max()}
    return {names[n]: float(values[n]) for n in NAMES}
