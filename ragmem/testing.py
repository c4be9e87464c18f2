"""Quality gates in a user's own test suite (pytest or any runner):

    import ragmem
    from ragmem.testing import assert_gates

    def test_rag_quality():
        result = ragmem.evaluate("eval.json", track=False)
        assert_gates(result, {"pass_rate": {"min": 0.8}, "latency_p95": {"max": 2.0}})

``assert_gates`` raises ``AssertionError`` with one line per failed gate (the lines ``ragmem run``
prints before exiting 3); without ``gates`` it checks the gates of the run's own config.
"""

from __future__ import annotations

from typing import Any

from ragmem.metrics.ranking import DEFAULT_KS
from ragmem.run import gates as _gates


def assert_gates(result: Any, gates: dict[str, dict[str, float]] | None = None) -> None:
    """``result``: a :class:`ragmem.run.engine.EvaluationResult` or a summary dict."""
    summary = result.summary if hasattr(result, "summary") else result
    if gates is None:
        results = [_gates.GateResult(**g) for g in summary.get("gates", [])]
        if not results:
            raise ValueError("no gates: pass gates={metric: {min?, max?}} or give the run's config a gates: section")
    else:
        _gates.check_names(gates, DEFAULT_KS, [n for n in gates if n in summary["metrics"]])
        results = _gates.evaluate(summary["metrics"], gates)
    failed = [g for g in results if not g.passed]
    if failed:
        raise AssertionError("\n".join(g.line() for g in failed))
