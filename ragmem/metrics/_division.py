"""The one place where ragmem divides: every 0/0 goes through here and is counted.

``zero_division`` (config key ``zero_division``) is the value a ratio takes when its denominator is
0: ``nan`` (the default: the case is undefined, null per example and left out of means, never a
silent 0), ``0.0`` or ``1.0`` (choices a user makes, as scikit-learn's ``zero_division``).
Every caller records how many cases were undefined, and the run logs ``undefined_<metric>``.
"""

from __future__ import annotations

import math

from ragmem.errors import ConfigError

ZERO_DIVISION_CHOICES = ("0", "1", "nan")


def parse_zero_division(value) -> float:
    """Config value -> float (0.0, 1.0 or nan); anything else is a ConfigError."""
    text = str(value).strip().lower()
    if text in ("0", "0.0"):
        return 0.0
    if text in ("1", "1.0"):
        return 1.0
    if text == "nan":
        return math.nan
    raise ConfigError(f"zero_division: expected 0, 1 or nan, got {value!r}")


def divide(numerator: float, denominator: float, zero_division: float) -> tuple[float, bool]:
    """``numerator / denominator``, or ``zero_division`` when the denominator is 0.

    Returns the value and whether the case was undefined (so callers can count it).
    """
    if denominator == 0:
        return zero_division, True
    return numerator / denominator, False
