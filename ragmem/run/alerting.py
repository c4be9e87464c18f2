"""What a run alerts on (``alerts:``) and what each message says; delivered by
:mod:`ragmem.orchestration.notify`.

One message per failed gate (``gate_failed``; a drift gate's alarm: ``drift``), naming the metric,
its value with its interval, the gate's line (its threshold, and for a comparison the difference
and its interval) and where the run and its report are; one when the run failed outright
(``run_failed``, with the reason); one when the share of failed agent calls or judgements passed
``alerts.errors_over`` (``errors``). A scheduled window's flow run (:mod:`flows.evaluate`) sends them
(:func:`ragmem.orchestration.notify.deliver`), as does ``ragmem run``, whose flow it is; ``ragmem
alerts test CONFIG`` sends one of its own.
"""

from __future__ import annotations

from typing import Any

from ragmem.config.loading import RunConfig
from ragmem.errors import failure_message
from ragmem.metrics import catalogue
from ragmem.run.gates import GateResult

Message = tuple[str, str, str]  # (event, title, body)


def _where(cfg: RunConfig, summary: dict[str, Any]) -> list[str]:
    window = (summary.get("traces") or {}).get("window") or {}
    lines = [f"experiment {cfg.experiment}" + (f", window {window.get('since') or '-'} to {window.get('until') or '-'}"
                                               if window else "")]
    if summary.get("run_id"):
        lines.append(f"run {summary['run_id']} in {summary.get('tracking_uri') or cfg.tracking_uri}; "
                     f"report: ragmem report {summary['run_id'][:8]}")
    return lines


def _measured(gate: dict[str, Any], summary: dict[str, Any]) -> str:
    """``pass_rate 0.4000 [0.2214, 0.5786]; threshold: min 0.8``."""
    metric, value = gate["metric"], gate.get("value")
    low_high = (summary.get("ci") or {}).get(metric)
    shown = "null" if value is None else f"{value:.4f}"
    if value is not None and low_high and None not in low_high:
        shown += f" [{low_high[0]:.4f}, {low_high[1]:.4f}]"
    bars = [f"{name} {gate[name]:g}" for name in ("min", "max", "max_regression") if gate.get(name) is not None]
    if gate.get("drift"):
        bars.append(f"drift max_drop {gate['drift']['max_drop']:g}")
    return f"{metric} {shown}; threshold: {', '.join(bars)}"


def messages(cfg: RunConfig, summary: dict[str, Any]) -> list[Message]:
    """The alerts a finished run sends, by ``alerts.on``."""
    on, out = set(cfg.alerts.on), []
    for gate in summary.get("gates") or []:
        event = "drift" if gate.get("drift") else "gate_failed"
        if gate["passed"] or event not in on:
            continue
        said = "drift" if event == "drift" else "gate failed"
        out.append((event, f"ragmem {cfg.experiment}: {said}: {gate['metric']}",
                    "\n".join([GateResult(**gate).line(), _measured(gate, summary), *_where(cfg, summary)])))
    counts, bar = summary.get("counts") or {}, cfg.alerts.errors_over
    n = counts.get("n_examples") or 0
    if "errors" in on and bar is not None and n:
        shares = {"agent calls": counts.get("n_agent_errors", 0) / n, "judgements": counts.get("n_judge_errors", 0) / n}
        over = {k: v for k, v in shares.items() if v > bar}
        if over:
            out.append(("errors", f"ragmem {cfg.experiment}: failed calls above {bar:g}",
                        "\n".join([", ".join(f"{v:.1%} of {k} failed" for k, v in over.items())
                                   + f" (alerts.errors_over {bar:g}; {n} examples)", *_where(cfg, summary)])))
    return out


def run_failed(cfg: RunConfig, exc: BaseException) -> list[Message]:
    """The alert of a run that failed outright (``run_failed``), or none."""
    if "run_failed" not in cfg.alerts.on:
        return []
    return [("run_failed", f"ragmem {cfg.experiment}: run failed",
             "\n".join([failure_message(exc), f"experiment {cfg.experiment}"]))]


def headline(summary: dict[str, Any]) -> list[str]:
    """A window's lines for the serve log: its headline metrics with their intervals, each gate's result."""
    ci = summary.get("ci") or {}
    out = []
    for name, value in (summary.get("metrics") or {}).items():
        facts = catalogue.facts(name)
        if facts is None or not facts.headline or value is None:
            continue
        interval = ci.get(name)
        out.append(f"{name} {value:.4f}" + (f" [{interval[0]:.4f}, {interval[1]:.4f}]"
                                             if interval and None not in interval else ""))
    for gate in summary.get("gates") or []:
        kind = "drift" if gate.get("drift") else "max_regression" if gate.get("max_regression") is not None else "bounds"
        out.append(f"gate {gate['metric']} ({kind}): passed" if gate["passed"] else GateResult(**gate).line())
    return out
