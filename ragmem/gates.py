"""Quality gates: a run that is fully computed and logged, then judged against bars.

    gates:                              # config
      pass_rate: {min: 0.8}
      latency_p95: {max: 2.0}
    ragmem run CONFIG --fail-under pass_rate=0.8 --fail-over latency_p95=2.0     # or on the command line

After the run (summary written, MLflow run logged), every gate is checked against the run's metric;
a metric that could not be computed (null) fails its gate. Each failed gate is one line
``error: gate failed: pass_rate 0.5833 < 0.8 (min)`` and the command exits 3. The outcome is in the
summary JSON (``gates``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ragmem.errors import ConfigError, RagmemError

EXIT_CODE = 3


@dataclass
class GateResult:
    metric: str
    value: float | None
    min: float | None
    max: float | None
    passed: bool

    def line(self) -> str:
        if self.value is None:
            return f"gate failed: {self.metric} could not be computed (null)"
        if self.min is not None and self.value < self.min:
            return f"gate failed: {self.metric} {self.value:.4g} < {self.min:g} (min)"
        return f"gate failed: {self.metric} {self.value:.4g} > {self.max:g} (max)"


class GateFailed(RagmemError):
    """One or more gates failed; the message holds one line per gate (exit code 3)."""

    exit_code = EXIT_CODE

    def __init__(self, failed: list[GateResult]):
        super().__init__("\nerror: ".join(g.line() for g in failed))
        self.failed = failed


def from_options(fail_under: list[str], fail_over: list[str]) -> dict[str, dict[str, float]]:
    """``--fail-under METRIC=VALUE`` / ``--fail-over METRIC=VALUE`` -> ``{metric: {min|max: value}}``."""
    gates: dict[str, dict[str, float]] = {}
    for flag, bound, items in (("--fail-under", "min", fail_under), ("--fail-over", "max", fail_over)):
        for item in items:
            metric, sep, raw = item.partition("=")
            try:
                value = float(raw)
            except ValueError:
                value = None
            if not sep or not metric.strip() or value is None:
                raise ConfigError(f"{flag} {item!r}: expected METRIC=NUMBER, e.g. {flag} pass_rate=0.8")
            gates.setdefault(metric.strip(), {})[bound] = value
    return gates


def check_names(gates: dict[str, Any], ks) -> None:
    """Every gated metric is a metric ragmem computes (before any work)."""
    from ragmem.metrics import expand_selection

    for metric in gates:
        try:
            expand_selection([metric], ks)
        except ConfigError as exc:
            raise ConfigError(f"gates.{metric}: {str(exc).removeprefix('metrics: ')}") from None


def evaluate(metrics: dict[str, Any], gates: dict[str, Any]) -> list[GateResult]:
    out = []
    for metric, gate in gates.items():
        low, high = (gate.get("min"), gate.get("max")) if isinstance(gate, dict) else (gate.min, gate.max)
        value = metrics.get(metric)
        passed = value is not None and (low is None or value >= low) and (high is None or value <= high)
        out.append(GateResult(metric, value, low, high, passed))
    return out


def as_dicts(results: list[GateResult]) -> list[dict[str, Any]]:
    return [asdict(r) for r in results]
