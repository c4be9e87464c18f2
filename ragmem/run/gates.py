"""Quality gates: a run that is fully computed and logged, then judged against bars.

    gates:                              # config
      pass_rate: {min: 0.8}
      latency_p95: {max: 2.0}
      f1: {max_regression: 0.02}         # against the run named by ``baseline:`` (or --baseline)
    ragmem run CONFIG --fail-under pass_rate=0.8 --fail-over latency_p95=2.0     # or on the command line
    ragmem run CONFIG --baseline 3f2a9c1e --max-regression pass_rate=0.02

After the run (summary written, MLflow run logged), every gate is checked against the run's metric;
a metric that could not be computed (null) fails its gate. Each failed gate is one line
``error: gate failed: pass_rate 0.5833 < 0.8 (min)`` and the command exits 3. The outcome is in the
summary JSON (``gates``).

A ``max_regression`` gate compares the run with the baseline run example by example, on the examples
both share (the paired test of ``ragmem compare RUN_A RUN_B``: paired-bootstrap interval of
``run - baseline``, randomization p-value). It fails only when the run is significantly worse by more
than DELTA: the whole interval (``stats.confidence``, 95% by default) of the difference lies below ``-DELTA`` (above ``+DELTA`` for a
lower-is-better metric such as a latency). Noise alone does not fail it; a real drop of more than
DELTA does. The baseline run (an id or a unique prefix) must be in the run's tracking store and have
its per-example table: it is checked before any agent or LLM call.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

from ragmem.errors import ConfigError, RagmemError
from ragmem.metrics import catalogue
from ragmem.metrics.names import expand_selection
from ragmem.stats.multiplicity import min_detectable
from ragmem.stats.paired_runs import paired_rows
from ragmem.tracking.lifecycle import metric_key
from ragmem.tracking.runs import read_baseline, scoring_of

EXIT_CODE = 3


@dataclass
class GateResult:
    metric: str
    value: float | None
    min: float | None
    max: float | None
    passed: bool
    max_regression: float | None = None  # the paired comparison with the baseline, for such a gate
    baseline: str | None = None
    baseline_value: float | None = None
    diff: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    min_detectable: float | None = None  # the smallest |diff| the comparison would detect 80% of the time
    n_clusters: int | None = None  # stats.cluster_by: the clusters resampled (None: the examples)
    drift: dict[str, Any] | None = None  # the monitor across windows, for such a gate (ragmem.run.drift)

    def line(self) -> str:
        if self.drift is not None:
            d = self.drift
            if d.get("window") is None:
                return f"drift: {self.metric} could not be computed in this window (null)"
            return (f"drift: {self.metric} {'up' if d['way'] == 'rise' else 'down'} {abs(d['drop']):.2f} over {_last(d)} "
                    f"(evidence {d['evidence']:.3g} > {d['threshold']:.3g})")
        if self.max_regression is not None:
            if self.diff is None:
                return (f"gate failed: {self.metric} could not be compared with baseline {str(self.baseline)[:8]} "
                        "(null in either run, or no shared examples)")
            measured = (f"[{self.ci_low:+.4g}, {self.ci_high:+.4g}] (p={self.p_value:.3g})" if self.p_value is not None
                        else "(a total of each run, measured: no interval)")
            return (f"gate failed: {self.metric} {self.value:.4g} vs baseline {str(self.baseline)[:8]} {self.baseline_value:.4g}: "
                    f"{self.diff:+.4g} {measured}, "
                    f"worse by more than max_regression {self.max_regression:g}"
                    + (f"; {self.n_clusters} clusters resampled" if self.n_clusters else ""))
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


def from_options(fail_under: list[str], fail_over: list[str],
                 max_regression: Sequence[str] = ()) -> dict[str, dict[str, float]]:
    """``--fail-under METRIC=VALUE`` / ``--fail-over METRIC=VALUE`` / ``--max-regression METRIC=DELTA``
    -> ``{metric: {min|max|max_regression: value}}``."""
    gates: dict[str, dict[str, float]] = {}
    for flag, bound, items in (("--fail-under", "min", fail_under), ("--fail-over", "max", fail_over),
                               ("--max-regression", "max_regression", max_regression)):
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


def check_names(gates: dict[str, Any], ks, custom: Sequence[str] = ()) -> None:
    """Every gated metric is a metric ragmem computes, or one of the config's own (``custom``: the names
    of ``metrics.custom``), before any work."""
    for metric in gates:
        if metric in custom or catalogue.is_total(metric):  # (an endpoint's cost: gated as a total)
            continue
        try:
            expand_selection([metric], ks)
        except ConfigError as exc:
            raise ConfigError(f"gates.{metric}: {str(exc).removeprefix('metrics: ')}") from None
        facts = catalogue.facts(metric)
        if _bound(gates[metric], "drift") is not None and (facts is None or facts.column is None):
            raise ConfigError(f"gates.{metric}.drift: {metric} has no per-example score to follow across windows "
                              "(e.g. pass_rate, faithfulness, context_relevance; a latency statistic or f1 is a figure of a whole window)")


def _bound(gate: Any, key: str) -> float | None:
    return gate.get(key) if isinstance(gate, dict) else getattr(gate, key, None)


def evaluate(metrics: dict[str, Any], gates: dict[str, Any]) -> list[GateResult]:
    """The min/max gates (a gate with only ``max_regression`` is judged by :func:`regressions`)."""
    out = []
    for metric, gate in gates.items():
        low, high = _bound(gate, "min"), _bound(gate, "max")
        if low is None and high is None:
            continue
        value = metrics.get(metric)
        passed = value is not None and (low is None or value >= low) and (high is None or value <= high)
        out.append(GateResult(metric, value, low, high, passed))
    return out


def judged(cfg, table, params: dict[str, str], metrics: dict[str, Any], baseline=None,
           traces: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"gates": [...]}`` (every gate of ``cfg`` against the run, :func:`evaluate` and
    :func:`regressions`, as dicts), or ``{}`` without gates."""
    if not cfg.gates:
        return {}
    return {"gates": as_dicts(evaluate(metrics, cfg.gates) + regressions(cfg, table, params, metrics, baseline, traces)
                              + drifts(metrics, traces))}


def drifts(metrics: dict[str, Any], traces: dict[str, Any] | None) -> list[GateResult]:
    """Every ``drift`` gate: failed when the monitor across windows alarms, or this window has no
    score for the metric (:func:`ragmem.run.drift.summarize`, the summary's ``traces.drift``)."""
    return [GateResult(metric, metrics.get(metric), None, None, d["window"] is not None and not d["alarmed"], drift=d)
            for metric, d in ((traces or {}).get("drift") or {}).items()]


def regressions(cfg, table, params: dict[str, str], metrics: dict[str, Any], baseline=None,
                traces: dict[str, Any] | None = None) -> list[GateResult]:
    """Every ``max_regression`` gate: the run against ``cfg.baseline`` (its per-example table:
    ``baseline``, read now when not given), example by example; a window of traffic
    (``data.traces.experiment``, no baseline) against the previous window, unpaired (``traces``: the summary's,
    :func:`ragmem.run.windows.summarize`)."""
    gated = {m: float(b) for m, g in cfg.gates.items() if (b := _bound(g, "max_regression")) is not None}
    if not gated:
        return []
    if cfg.data.traces.experiment and not cfg.baseline:
        return _window_regressions(gated, metrics, (traces or {}).get("previous"), cfg.stats.confidence,
                                   cfg.metrics.directions)
    base = baseline if baseline is not None else read_baseline(cfg.tracking_uri, cfg.baseline)
    info = base.attrs["run"]
    rows, _ = paired_rows(base, table, list(gated), *scoring_of(info.data.params),
                          cfg.stats.resamples or 1000, cfg.seed, cfg.stats.confidence, cfg.stats.bootstrap)
    rows += _totals([m for m in gated if catalogue.is_total(m)], metrics, info.data.metrics)
    return _against(gated, metrics, rows, info.info.run_id, cfg.stats.confidence, cfg.metrics.directions)


def _window_regressions(gated: dict[str, float], metrics: dict[str, Any], previous: dict[str, Any] | None,
                        confidence: float, own: dict[str, str]) -> list[GateResult]:
    """The ``max_regression`` gates of a window against the previous one (unpaired); the first
    window, with none before it, passes them (nothing to have dropped from)."""
    if previous is None:
        return [GateResult(metric, metrics.get(metric), None, None, True, max_regression=delta)
                for metric, delta in gated.items()]
    return _against(gated, metrics, previous["rows"], previous["run_id"], confidence, own)


def _totals(names: list[str], metrics: dict[str, Any], logged: dict[str, float]) -> list[dict[str, Any]]:
    """``B - A`` of figures that are totals of each run (an endpoint's cost, tokens, calls), measured
    and not estimated from examples: no interval, the difference itself."""
    rows = []
    for name in names:
        a, b = logged.get(metric_key(name)), metrics.get(name)
        if a is not None and b is not None:
            rows.append({"metric": name, "a": a, "b": b, "diff": b - a, "ci_low": b - a, "ci_high": b - a,
                         "p_value": None})
    return rows


def _against(gated: dict[str, float], metrics: dict[str, Any], rows: list[dict[str, Any]], baseline: str,
             confidence: float, own: dict[str, str] | None = None) -> list[GateResult]:
    """Each gate's ``B - A`` row (paired or unpaired) judged: failed when the metric was not compared
    (null in either run) or the whole interval lies beyond ``-DELTA`` (``+DELTA`` for a lower-is-better
    metric)."""
    by_metric = {r["metric"]: r for r in rows}
    out = []
    for metric, delta in gated.items():
        row = by_metric.get(metric, {})
        low, high = row.get("ci_low"), row.get("ci_high")
        if row.get("diff") is None or low is None or high is None:
            passed = False
        else:
            passed = not (low > delta if catalogue.lower_is_better(metric, own or {}) else high < -delta)
        out.append(GateResult(metric, metrics.get(metric), None, None, passed, max_regression=delta,
                              baseline=baseline, baseline_value=row.get("a"), diff=row.get("diff"),
                              ci_low=low, ci_high=high, p_value=row.get("p_value"),
                              min_detectable=None if row.get("p_value") is None else min_detectable(low, high, confidence),
                              n_clusters=row.get("n_clusters")))
    return out


CLUSTERED = "stats.cluster_by: whole clusters weighed and swapped together"


def passed_line(gate: dict[str, Any]) -> str | None:
    """What a passed baseline gate could and could not see: ``pass_rate vs baseline 1db39252: -0.0123
    [-0.0610, +0.0360]; the comparison would detect a change of 0.0682 80% of the time`` (a smaller
    regression than that may be there, unseen); ``None`` for another gate."""
    if gate.get("drift") is not None:
        return drift_line(gate["metric"], gate["drift"])
    if gate.get("max_regression") is None or gate.get("diff") is None or gate.get("min_detectable") is None:
        return None
    return (f"{gate['metric']} vs baseline {gate['baseline'][:8]}: {gate['diff']:+.4f} [{gate['ci_low']:+.4f}, "
            f"{gate['ci_high']:+.4f}]; the comparison would detect a change of {gate['min_detectable']:.4f} 80% of "
            f"the time (a smaller one may be there, unseen)"
            + (f"; {gate['n_clusters']} clusters resampled ({CLUSTERED})" if gate.get("n_clusters") else ""))


def _last(d: dict[str, Any]) -> str:
    """``the last window`` or ``the last 3 windows``: the stretch a drift verdict's change covers."""
    return "the last window" if d["over"] == 1 else f"the last {d['over']} windows"


def drift_line(metric: str, d: dict[str, Any]) -> str:
    """What a drift gate that passed saw."""
    if d["drop"] is None:
        return (f"drift: {metric} watched once {d['baseline_windows']} windows are seen ({d['windows']} so far: "
                "no change looked for yet)")
    worse = d["drop"] >= 0
    moved = ("up" if worse else "down") if d["way"] == "rise" else ("down" if worse else "up")
    return (f"drift: {metric} evidence {d['evidence']:.3g} < {d['threshold']:.3g} over {d['windows']} windows "
            f"(no sustained {d['way']} of {d['max_drop']:g} seen; the likeliest change: {moved} {abs(d['drop']):.3f} "
            f"over {_last(d)})")


def as_dicts(results: list[GateResult]) -> list[dict[str, Any]]:
    return [asdict(r) for r in results]
