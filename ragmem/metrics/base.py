"""What every metric returns, and the helpers they share."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable


@dataclass
class MetricResult:
    """Aggregates (``None`` = not defined for this run, e.g. no labels), optional per-example
    columns to add to the results table, and the number of undefined (0/0) cases per metric."""

    values: dict[str, float | None]
    columns: dict[str, list[Any]] = field(default_factory=dict)
    undefined: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    ci: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # bootstrap intervals


def nanmean(values: Iterable[float | None]) -> float | None:
    """Mean of the finite values; ``None`` when there are none (nothing to average is not 0)."""
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return sum(kept) / len(kept) if kept else None
