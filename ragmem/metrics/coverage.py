"""Keyword coverage: how much of one text's keywords another holds.

With ``K`` the keyword set (:class:`ragmem.text.keywords.KeywordExtractor`) and ``C`` the union of the
keywords of all retrieved contexts of an example:

- ``avg_coverage       = mean_i |C_i ∩ K(generated_i)| / |K(generated_i)|`` — how much of the
  answer is grounded in the context;
- ``reference_coverage = mean_i |C_i ∩ K(reference_i)| / |K(reference_i)|`` — how much of the
  reference answer the context holds (did retrieval and memory bring what was needed).

An example whose answer (reference) has no keyword is undefined: it takes ``zero_division``
(default 0; with ``nan`` it is left out of the mean) and is counted in ``undefined_<metric>``.
Examples whose agent call failed are left out and counted in ``n_errors``.

>>> from ragmem.metrics.coverage import coverage
>>> coverage({"a", "b"}, {"a", "c"}, zero_division=0.0)
(0.5, False)
>>> coverage(set(), {"a"}, zero_division=0.0)
(0.0, True)
"""

from __future__ import annotations

from typing import AbstractSet

from ragmem.metrics._division import divide


def coverage(target: AbstractSet[str], source: AbstractSet[str], zero_division: float) -> tuple[float, bool]:
    """``|source ∩ target| / |target|``: the share of ``target``'s keywords found in ``source``."""
    return divide(len(target & source), len(target), zero_division)
