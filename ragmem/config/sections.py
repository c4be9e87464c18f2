"""What every section of the settings schema is made of: :class:`Section` (unknown keys are errors,
values are not coerced), :func:`setting` (a default and a one-line description) and the constrained
number types the sections share. The schema itself is :mod:`ragmem.config.settings`."""

from __future__ import annotations

from typing import Annotated, Any

from annotated_types import Ge, Gt, Le
from pydantic import BaseModel, ConfigDict, Field

Count = Annotated[int, Ge(0)]          # 0, 1, 2, ...
Positive = Annotated[int, Ge(1)]       # 1, 2, ...
Seconds = Annotated[float, Gt(0)]      # > 0
Backoff = Annotated[float, Ge(0)]      # >= 0
Share = Annotated[float, Ge(0), Le(1)]  # 0..1
# bounds where an unbounded value would exhaust memory, threads or time before any work is done
# (checked with the rest of the settings, a one-line error naming the setting)
Threads = Annotated[int, Ge(1), Le(1024)]            # calls or requests in flight: a thread or socket each
Retries = Annotated[int, Ge(0), Le(100)]
Resamples = Annotated[int, Ge(0), Le(1_000_000)]      # bootstrap resamples (a million: minutes at 10k examples)
Processes = Annotated[int, Ge(1), Le(512)]


def setting(default: Any, description: str, **kwargs: Any) -> Any:
    """A field with its default and one-line description (a section class: built per instance)."""
    if isinstance(default, type) and issubclass(default, BaseModel):
        return Field(default_factory=default, description=description, **kwargs)
    if isinstance(default, (list, dict)):
        return Field(default_factory=lambda: type(default)(default), description=description, **kwargs)
    return Field(default, description=description, **kwargs)


class Section(BaseModel):
    """A group of settings: unknown keys are errors, values are not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True, validate_default=False)
