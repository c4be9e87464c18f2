"""The terminal tables of the ``ragmem`` command (rich): a run's summary, a sweep, a paired
comparison, the memory benchmark. Everything shown is also in the JSON the command writes."""

from __future__ import annotations

import math
import sys
from typing import Any, Callable

from rich import box
from rich.console import Console
from rich.table import Table

from ragmem.config.secrets import scrub
from ragmem.config.settings import run_setting
from ragmem.memory.bench_data import DATASETS
from ragmem.metrics import catalogue
from ragmem.metrics.catalogue import is_count
from ragmem.metrics.names import AT_K, JUDGE
from ragmem.metrics.scored import causes, failed_replies
from ragmem.stats import clusters
from ragmem.text import plural  # noqa: F401  (also ragmem.report.terminal.plural)


def _width() -> int:
    """The terminal's width, kept within 80..120 (a pipe or a test capture: 120)."""
    import shutil

    columns = shutil.get_terminal_size((120, 24)).columns
    return max(80, min(columns, 120))


out = Console(width=_width())

#: Short column headers (tables fit 80-120 columns without breaking a word), explained by a legend.
_SHORT = (("reference_coverage", "ref_cov"), ("hit_rate_at_", "hit@"), ("mrr_at_", "mrr@"), ("ndcg_at_", "ndcg@"),
          ("recall_at_", "recall@"), ("precision_at_", "prec@"), ("map_at_", "map@"), ("avg_coverage", "ctx_cov"),
          ("short_window", "window"), ("avg_latency", "lat"))


def short(name: str) -> str:
    for long, brief in _SHORT:
        name = name.replace(long, brief)
    return name


def legend(names) -> str | None:
    used = [(long + ("k" if long.endswith("_at_") else ""), brief + ("k" if brief.endswith("@") else ""))
            for long, brief in _SHORT if any(long in n for n in names)]
    return ("columns: " + ", ".join(f"{b} = {lg}" for lg, b in used)) if used else None


def is_latency(name: str) -> bool:
    """Whether ``name`` is in seconds (the catalogue's unit: a latency, an ingest time)."""
    return catalogue.is_seconds(name)


def label(name: str) -> str:
    """A metric's name as shown: a latency with its unit, seconds, as everywhere (the summary JSON,
    MLflow, sweep constraints, gates, report.html)."""
    return f"{name} (s)" if is_latency(name) else name


def say(text: str) -> None:  # (a URL's secrets masked: ragmem.config.secrets.scrub)
    """A line of text: never hard-wrapped (a long one wraps in the terminal), no markup."""
    out.print(scrub(text), markup=False, highlight=False, soft_wrap=True)


def seconds(value: float, sign: str = "") -> str:
    """A latency in seconds to 4 significant digits (0.000213, 0.01235, 1.5, 12.35): a 0.2 ms
    memory search and a 3 s LLM call both keep their digits."""
    return f"{value:{sign}.4g}"


def fmt(name: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if is_count(name) and isinstance(value, (int, float)) and float(value).is_integer():
        return str(int(value))
    if is_latency(name) and isinstance(value, (int, float)):
        return seconds(value)
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 1e5 else f"{value:.4g}"
    return str(value)


def print_summary(summary: dict[str, Any], show_all: bool = False, stored: bool = True) -> None:
    """The summary's table and lines; the last names the run, its store and its report (``stored=False``
    leaves it to the caller, for :func:`print_stored` to print last)."""
    failures = sum(failed_replies(summary["metrics"]).values())
    table = Table(title=f"{summary['experiment']}: {plural(summary['n_examples'], 'example')}, "
                        f"{plural(summary['n_errors'], 'error')}"
                        + (f", {plural(failures, 'failed metric reply', 'failed metric replies')}" if failures else ""),
                  title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("CI", justify="right")
    intervals = summary.get("ci", {})
    ks = [int(k) for k in str(summary.get("params", {}).get("ranking.k", "")).split(",") if k.strip().isdigit()]
    own = catalogue.own_of(summary.get("params", {}))
    llm = str(summary.get("params", {}).get("judge.type", "keyword")) != "keyword"
    hidden = 0
    nulls: list[str] = []
    rows: list[tuple[str, str, str]] = []
    judging: list[tuple[str, str, str]] = []
    listed: list[str] = []
    for name, value in summary["metrics"].items():
        # (the judge's reliability: what measures the judge, not the system; accuracy and recall are
        # judge_label_agreement and judge_sensitivity again, shown with --all)
        judge_figure = catalogue.section(name) == JUDGE
        in_section = judge_figure and (show_all or catalogue.shown(name, ks, own))
        if not show_all and not in_section and (judge_figure or not catalogue.shown(name, ks, own)):
            hidden += 1
            continue
        if value is None:  # (reliability figures: shown where their inputs exist)
            if not show_all and not in_section:
                nulls.append(name)
            if not show_all:
                continue
        interval = intervals.get(name)
        shown = f"[{fmt(name, interval[0])}, {fmt(name, interval[1])}]" if interval else ""
        partial = " (partial)" if name in summary.get("partial", {}) else ""  # the line below says how much
        offline = " (keyword)" if catalogue.keyword_based(name, llm, own) else ""  # (word overlap, not meaning)
        (judging if in_section else rows).append((label(name) + partial + offline, fmt(name, value), shown))
        listed += [] if in_section else [name]
    for row in rows:
        table.add_row(*row)
    if judging:  # below the system's metrics, under their own heading: they measure the judge
        table.add_section()
        table.add_row("[italic]judge reliability[/italic]", "", "")
        for row in judging:
            table.add_row(*row)
    out.print(table)
    say("CI: bootstrap intervals (stats.confidence); pass_rate_ppi's is the prediction-powered one"
        if "pass_rate_ppi" in intervals else "CI: bootstrap intervals (stats.confidence)")
    if any(catalogue.keyword_based(n, llm, own) for n in listed):
        say("(keyword): the offline judge's word overlap, not what the name says (a copied wrong sentence is "
            "'faithful', a paraphrase is not): judge.type llm for verdicts, faithfulness and relevance that mean it")
    if summary.get("clusters"):  # the unit of resampling, how many, and what the clusters cost
        say(clusters.line(summary["clusters"], listed))
    if judging:
        say("judge reliability: how far the judge can be trusted (agreement with the labels, with itself), "
            "not the system's quality (pass_rate is the system as judged)")
    if summary.get("judge_unreliable"):
        out.print(summary["judge_unreliable"], style="bold red", markup=False, highlight=False, soft_wrap=True)
    if summary.get("partial"):  # a score that rests on part of the data says so, with how much and why
        share = run_setting(summary.get("params", {}), "report.min_coverage")
        out.print(f"partial (scored on less than {share} of the examples): " + partial_text(summary["partial"]),
                  style="bold yellow", markup=False, highlight=False, soft_wrap=True)
    if nulls:  # each with why, when it failed on examples it could have been scored on (not just undefined)
        coverage = summary.get("coverage", {})
        said = [f"{n} ({coverage[n]['scored']} of {coverage[n]['of']}: {causes(coverage[n]['reasons'])})"
                if coverage.get(n, {}).get("of") and coverage[n].get("reasons") else n for n in nulls]
        say(f"not computed (null): {', '.join(said)}")
    if hidden:
        say(f"({plural(hidden, 'more metric')} in the summary JSON and in MLflow; --all shows them here)")
    counts = {k: v for k, v in summary.get("counts", {}).items() if v and k not in ("n_examples",)}
    if counts:
        say("counts: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    for note in summary.get("notes", []):
        say(f"note: {note}")
    if stored:
        print_stored(summary)


def print_stored_parent(result: dict[str, Any]) -> None:
    """A sweep's or a benchmark's last line: its parent run, where it is stored, how to compare its children."""
    if result.get("parent_run_id"):
        where = f"; stored in {result['tracking_uri']}" if result.get("tracking_uri") else ""
        say(f"MLflow parent run {result['parent_run_id']} in experiment '{result['experiment']}'{where}; "
            f"compare: {compare_hint(result)} (browse: ragmem ui)")


def compare_hint(result: dict[str, Any]) -> str:
    """The command that lists a sweep's children as it ranked them, or a benchmark's experiment."""
    if "objective" in result and result.get("parent_run_id"):
        return f"ragmem compare --sweep {result['parent_run_id'][:8]}"
    return f"ragmem compare --experiment {result['experiment']}"


def print_stored(summary: dict[str, Any]) -> None:
    """The run, where it is stored and the command of its report (nothing for an untracked run)."""
    if summary.get("run_id"):
        where = f"; stored in {summary['tracking_uri']}" if summary.get("tracking_uri") else ""
        say(f"MLflow run {summary['run_id']} in experiment '{summary['experiment']}'{where}; "
            f"report: ragmem report {summary['run_id'][:8]} (browse: ragmem ui)")


def _column(view: Table, header: str, numeric: bool = True, **kwargs: Any) -> None:
    """A column whose header never breaks mid-word."""
    view.add_column(header, justify="right" if numeric else "left", min_width=len(header), **kwargs)


def print_sweep(result: dict[str, Any], spec) -> None:
    metric = spec.metric
    extra = [m for m in catalogue.beside_objective() if m != metric and AT_K.match(m) is None]
    keys = [k.rsplit(".", 1)[-1] for k in spec.keys]
    n = len(result["children"])
    view = Table(title=f"sweep {result['experiment']}: {plural(n, 'configuration')}, objective {spec.goal} {metric}",
                 title_justify="left", box=box.SIMPLE_HEAVY, pad_edge=False, collapse_padding=True)
    for key in keys:
        _column(view, short(key), numeric=False)
    for name in [metric, *extra]:
        _column(view, short(label(name)))
    _column(view, "Δ top", numeric=True)
    _column(view, "p", numeric=False)
    _column(view, "status", numeric=False, overflow="fold")
    best_id = (result.get("best") or {}).get("run_id")
    for child in result["children"]:
        m = child["metrics"]
        style = "bold green" if child["run_id"] == best_id else None
        versus = child.get("vs_best") or {}
        if versus.get("is_best"):
            shown, p = "top", ""
        elif versus:
            shown = f"{versus['diff']:+.4f}"
            p = f"{versus['p_value']:.3f} {'worse*' if versus['significantly_worse'] else 'tied'}"
        else:
            shown, p = "", ""
        status = "ok" if not child["error"] else f"FAILED: {child['error'][:60]}"
        stopped = child.get("race") or {}
        if not child["error"] and not stopped.get("candidate", True):  # (a race or a tpe pruner stopped it)
            status = f"{stopped['reason']} after {stopped['stopped_at']}"
        view.add_row(*[str(child["params"][k]) for k in spec.keys], *[fmt(n_, m.get(n_)) for n_ in [metric, *extra]],
                     shown, p, status, style=style)
    out.print(view)
    names = [*spec.keys, metric, *extra]
    say("Δ top: objective difference to the top configuration on the same examples, p: randomization p-value; "
        "worse* = significantly worse (p < 0.05), tied = not" + (f"; {legend(names)}" if legend(names) else ""))
    if best_id:
        breaks = result["objective"].get("tie_break") or []
        rule = ", then ".join(f"{t['goal']} {t.get('setting') or t.get('metric')}" for t in breaks) or f"the higher {metric}"
        n_tied = len(result.get("tied_for_best") or [])
        say(f"{plural(n_tied, 'configuration')} tied for best; chosen by tie_break ({rule})")
        say(f"best: {result['best']['params']} ({metric}={fmt(metric, result['best']['metrics'][metric])}), "
            f"run {best_id}; parent run {result['parent_run_id']}")
    else:
        say(f"no configuration met the objective and constraints; parent run {result['parent_run_id']}")
    if result.get("judges"):
        print_judges(result["judges"])


def print_judges(judges: dict[str, Any]) -> None:
    """A sweep that varies the judge: each judge's choice, and how far each pair of judges ranks the
    agent configurations alike (Kendall's tau with its bootstrap interval)."""
    metric = judges["metric"]
    for judge in judges["judges"]:
        chosen = judge["chosen"]
        shown = "none (no configuration met the objective)" if chosen is None else \
            f"{chosen['agent']} ({metric}={fmt(metric, chosen[metric])})"
        say(f"judge {judge['label']}: chose {shown}")
    for pair in judges["pairs"]:
        tau, ci = pair["kendall_tau"], pair["ci"]
        value = "n/a" if tau is None else f"{tau:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")
        say(f"judges {pair['a']} and {pair['b']}: Kendall's tau {value} over {pair['n_configurations']} agent "
            f"configurations ranked by {metric}")


def _setting(value: Any, width: int = 32) -> str:
    text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def judge_line(side: str, judge: dict[str, Any]) -> str:
    """One run's judge in a comparison: its prediction-powered pass rate, its kappa with the labels."""
    parts = []
    if judge.get("pass_rate_ppi") is not None:
        ci = judge.get("pass_rate_ppi_ci")
        parts.append(f"pass_rate_ppi {judge['pass_rate_ppi']:.4f}" + (f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "")
                     + f" on {int(judge.get('n_labelled') or 0)} labels")
    if judge.get("judge_label_kappa") is not None:
        parts.append(f"judge_label_kappa {judge['judge_label_kappa']:.4f}")
    if judge.get("judge_flip_rate") is not None:
        parts.append(f"judge_flip_rate {judge['judge_flip_rate']:.4f}")
    if judge.get("unreliable"):
        parts.append("JUDGE UNRELIABLE (its judged numbers should not be trusted)")
    return f"judge of {side}: " + ("; ".join(parts) if parts else "no labels, one sample per verdict")


def partial_text(partial: dict[str, str], shown: int = 4) -> str:
    """The partial metrics, those with the same count and reason together (a ranking family at
    every k is one entry, not 24): ``hit_rate_at_1, mrr_at_1, ... (+20 more) 32 of 36 (4: ...)``."""
    groups: dict[str, list[str]] = {}
    for name, why in partial.items():
        groups.setdefault(why, []).append(name)
    return "; ".join(", ".join(names[:shown]) + (f" (+{len(names) - shown} more)" if len(names) > shown else "")
                     + f" {why}" for why, names in groups.items())


def print_paired(result: dict[str, Any]) -> None:
    view = Table(title=f"B - A on {plural(result['n_shared'], 'shared example')} (A = {result['run_a'][:8]}, "
                       f"B = {result['run_b'][:8]}; {result['resamples']} resamples)", title_justify="left")
    level = f"{result.get('confidence', 0.95) * 100:.0f}%"
    wide = out.width >= 100  # (80 columns hold six; the p-value before the correction is in --output)
    for column in ("metric", "A", "B", "B - A", f"{level} CI", "p (Holm)", *(["detectable"] if wide else [])):
        _column(view, column, numeric=column != "metric")

    def signed(name: str, value: float | None) -> str:
        return "n/a" if value is None else (seconds(value, "+") if is_latency(name) else f"{value:+.4f}")

    for row in result["metrics"]:
        name = row["metric"]
        ci = f"[{fmt(name, row['ci_low'])}, {fmt(name, row['ci_high'])}]" if row["ci_low"] is not None else "n/a"
        adjusted, detectable = row.get("p_holm"), row.get("min_detectable")
        mark = " *" if row.get("marked") else "  "
        shown = "" if row.get("marked") or detectable is None else signed(name, detectable).lstrip("+")
        view.add_row(label(name) + (" (partial)" if row.get("partial") else ""), fmt(name, row["a"]), fmt(name, row["b"]), signed(name, row["diff"]), ci,
                     "n/a" if adjusted is None else f"{adjusted:.4f}{mark}", *([shown] if wide else []))
    out.print(view)
    alpha = 1 - result.get("confidence", 0.95)
    finer = result.get("permutations", result["resamples"])
    each = f"{result['resamples']} permutations" + (f", {finer} for those below {alpha:.2g} before the correction"
                                                     if finer > result["resamples"] else "")
    partial = [(row["metric"], row["partial"]) for row in result["metrics"] if row.get("partial")]
    if partial:  # a difference that rests on part of a run's data says so, with how much and why
        out.print("partial (scored on less than report.min_coverage of a run's examples): " + "; ".join(
            f"{name} " + ", ".join(f"{side} {why}" for side, why in sides.items()) for name, sides in partial),
            style="bold yellow", markup=False, highlight=False, soft_wrap=True)
    unit = result.get("resampled") or {}
    if unit.get("unit") == "clusters":  # (stats.cluster_by: whole clusters weighed and swapped together)
        say(f"resampled: {plural(unit['n'], 'cluster')} ({unit.get('by')}) of the {result['n_shared']} examples, "
            f"not the examples alone; expanded percentile intervals")
    say(f"* marked: the {level} paired-bootstrap interval excludes 0 and p stays below {alpha:.2g} after Holm's "
        f"correction over the metrics compared (approximate randomization test, two-sided, {each})")
    say("detectable: beside a difference not marked, the smallest |B - A| this comparison would detect 80% of "
        "the time (from the interval's width): a smaller one may be there, unseen"
        + ("" if wide else " (a column from 100 columns of terminal; min_detectable in --output)"))
    for side, judge in (result.get("judge") or {}).items():
        say(judge_line(side.upper(), judge))
    differ = result["settings_that_differ"]
    if differ:  # a signature is long and says only "differs"; values are cut to 32 characters
        settings = [f"{k} differs" if k.endswith(".signature") else f"{k}: {_setting(a)} -> {_setting(b)}"
                    for k, (a, b) in list(differ.items())[:8]]
        more = f" (+{len(differ) - 8} more in the JSON)" if len(differ) > 8 else ""
        say(f"settings that differ: {'; '.join(settings)}{more}")
    for warning in result["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)


def print_pairwise(result: dict[str, Any]) -> None:
    """A pairwise comparison (:mod:`ragmem.judges.pairwise`): B's wins, ties and losses against A, its win
    rate with the interval, how often the verdict changed with the order, the judge's usage."""
    a, b = result["run_a"][:8], result["run_b"][:8]
    say(f"pairwise judging of B = {b} against A = {a} on {plural(result['n_judged'], 'example')} "
        f"(each judged twice, the answers swapped): {result['criterion']}")
    rate, ci = result["win_rate"], result["win_rate_ci"]
    shown = "n/a" if rate is None else f"{rate:.4f}" + (f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "")
    same = result.get("n_identical", 0)
    say(f"B wins {result['wins']}, ties {result['ties']}, loses {result['losses']}; B's win rate (ties half) {shown}"
        + (f"; {same} of the ties: identical answers, not sent to the judge" if same else ""))
    swap = result["swap_inconsistency"]
    say(f"swap_inconsistency {'n/a' if swap is None else f'{swap:.4f}'}: {result['n_swap_inconsistent']} verdicts "
        f"changed with the order (of {result.get('n_asked', result['n_judged'])} asked; counted as ties)")
    usage = result["usage"]
    say(f"judge requests {int(usage.get('judge_calls', 0))}, cached {int(usage.get('judge_cache_hits', 0))}, "
        f"failed examples {result['n_failed']}, cost ${usage.get('judge_cost_usd', 0.0):.4f}")
    for reason, count in list(result["failure_reasons"].items())[:3]:
        print(f"warning: {plural(count, 'example')} not judged: {reason}", file=sys.stderr)
    if result["n_failed"] and result.get("cached_replies"):
        print(f"note: the same command asks only the {plural(result['n_failed'], 'example')} not judged again "
              f"(the other replies are cached)" + ("; a slow server: raise judge.timeout_s" if any(
                  "timed out" in r for r in result["failure_reasons"]) else ""), file=sys.stderr)
    if result["n_unanswered"]:
        print(f"warning: {result['n_unanswered']} shared example(s) left out: a run has no answer for them",
              file=sys.stderr)


def print_bench_paired(paired: list[dict[str, Any]], baseline: str) -> None:
    """Each layer against the baseline, question by question (:mod:`ragmem.memory.bench_compare`)."""
    view = Table(title=f"against {baseline}, on the same questions (layer - {baseline})", title_justify="left")
    for column in ("method", "scope", "J diff", "J 95% CI", "J p", "F1 diff", "F1 95% CI", "F1 p"):
        _column(view, column, numeric=column not in ("method", "scope"))
    cells: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for row in paired:
        cells.setdefault((row["method"], row["scope"]), {})[row["score"]] = row

    def shown(row: dict[str, Any] | None) -> list[str]:
        if row is None or row["diff"] is None:
            return ["n/a", "", ""]
        ci = "" if row["ci_low"] is None else f"[{row['ci_low']:+.4f}, {row['ci_high']:+.4f}]"
        return [f"{row['diff']:+.4f}{' *' if row['marked'] else '  '}", ci,
                "" if row["p_value"] is None else f"{row['p_value']:.3f}"]

    for (method, scope), scores in cells.items():
        view.add_row(method, scope, *shown(scores.get("J")), *shown(scores.get("F1")))
    out.print(view)
    say("* marked: the 95% paired-bootstrap interval excludes 0 and p stays below 0.05 after Holm's correction "
        "over the layer's figures (p: approximate randomization, two-sided, uncorrected); abstention has J only")
    for unit in ("clusters", "questions"):  # the unit of resampling, and how many clusters there were
        counts = sorted({row["n_clusters"] for row in paired if row.get("resampled") == unit})
        if not counts:
            continue
        many = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
        say(f"resampled: whole clusters of questions, each a conversation (in LongMemEval a haystack): {many} "
            f"clusters a figure; expanded percentile intervals" if unit == "clusters"
            else f"resampled: questions alone ({many} {'cluster' if counts[-1] == 1 else 'clusters'} a figure: fewer "
                 f"than 5 are too few to resample; the intervals may be too narrow)")


def print_rerun(rerun: list[dict[str, Any]], first: str) -> None:
    """``bench-memory --rerun``: each layer against its first run (:func:`ragmem.memory.bench_compare.rerun_comparison`)."""
    for layer in rerun:
        overall = {r["score"]: r for r in layer["paired"] if r["scope"] == "overall"}
        figures = "; ".join(f"overall {k} {r['diff']:+.4f}" + (" *" if r["marked"] else "")
                            for k, r in overall.items() if r["diff"] is not None)
        same = {True: "every per-question score identical to", False: "scores differ from", None: "nothing to compare with"}
        say(f"rerun: {layer['method']}: {same[layer['identical']]} run {first[:8]}" + (f" ({figures})" if figures else ""))


def print_bench(result: dict[str, Any], scopes: Callable[[dict[str, Any]], None] | None = None) -> None:
    rows = result["results_table"]
    view = Table(title=f"{result['experiment']}: {plural(result['n_conversations'], 'conversation')}, "
                       f"{plural(result['n_questions'], 'question')} (F1 token F1, B1 BLEU-1, J judge)",
                 title_justify="left")
    _column(view, "metric", numeric=False)
    for row in rows:
        _column(view, row["method"])
    columns = [c for c in dict.fromkeys(k for row in rows for k in row) if c != "method"]
    empty = []
    for column in columns:
        values = [row.get(column) for row in rows]
        if all(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
            empty.append(column)
            continue
        kind = f"n_{column}" if column.endswith(("errors", "tokens", " n")) and column != "context tokens" else column
        if column.endswith("(s)"):  # seconds, as everywhere
            view.add_row(column, *[fmt("latency", v) for v in values])
        else:
            view.add_row(column, *[fmt(kind, v) for v in values])
    out.print(view)
    if empty:
        say(f"n/a for every method (not shown): {', '.join(empty)}")
    if any("abstention J" in row for row in rows) and not DATASETS[result.get("dataset", "locomo")].overall_abstention:
        which = ("categories 1-4; abstention J: the share of category 5 questions" if result.get("dataset", "locomo") == "locomo"
                 else "every question type; abstention J: the share of the _abs questions")
        say(f"overall: {which} (the answer is not in the conversation) answered that it is not there, never in the overall")
    if scopes is not None:  # the per-scope table (ragmem.report.bench_scopes), given by the caller
        scopes(result)
    if result.get("paired"):
        print_bench_paired(result["paired"], result["baseline"])
    for method in result["methods"]:
        if method.get("error"):
            say(f"{method['method']} FAILED: {method['error']}")
    say(f"parent run {result['parent_run_id']} (table: {DATASETS[result.get('dataset', 'locomo')].results}.json; one child run per method)")
