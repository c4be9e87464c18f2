"""``report.html``: one self-contained page per run (no script, no request at view time: it opens in
MLflow's artifact viewer, in a mail, offline), and ``diff.html`` for two runs side by side.

A run's page: headline metrics with their intervals (pass rate first), the failures (agent and judge
errors, with their reasons), the worst examples (failed verdicts first, then the lowest reference
coverage) with query, answer, reference and contexts side by side, the keywords the judge matched
highlighted, and every per-example score; the per-source breakdown (what each context source
brought) and the latency distribution (an inline SVG histogram, in seconds, as every latency ragmem shows).

The diff page (``ragmem report RUN_A RUN_B``, built in :mod:`ragmem.report.pages` from these parts):
the paired comparison of the headline metrics (the test of ``ragmem compare``), the examples whose
verdict flipped either way, those whose scores moved most, and the examples B won and lost under the
latest pairwise judging of the two runs.

Written by hand (a few string templates): a templating or plotting dependency would add more than
this page needs, and the page must not fetch anything.
"""

from __future__ import annotations

import html
import json
import math
from typing import AbstractSet, Any

import pandas as pd

from ragmem.config.settings import run_setting
from ragmem.metrics import catalogue
from ragmem.metrics.names import SYSTEM
from ragmem.metrics.scored import failed_replies
from ragmem.schema import CONTEXT_SOURCES

WORST = 25   # examples shown on a run's page
MOVED = 25   # examples shown per section of a diff
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d2329;max-width:1400px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #d8dde3;padding-bottom:4px}
.meta{color:#5b6670;font-size:12px}table{border-collapse:collapse;margin:6px 0}
th,td{border:1px solid #d8dde3;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f3f5f7}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.ex td{max-width:380px;word-wrap:break-word}mark.hit{background:#c9f2d0}mark.miss{background:#fcd4d4}
.pass{color:#137333;font-weight:600}.fail{color:#b3261e;font-weight:600}.err{color:#b3261e}
.note{color:#5b6670;font-size:12px;margin:4px 0}details{margin:2px 0}summary{cursor:pointer;color:#2a5db0}
.sc{font-size:12px;white-space:nowrap}.ctx{font-size:12px;color:#333;margin:2px 0 2px 12px}.up{color:#137333}.down{color:#b3261e}
"""


#: control characters (not tab, line feed, carriage return) shown as their Unicode pictures (NUL as ␀):
#: invalid in HTML, and invisible where they are kept
_PICTURES = {c: 0x2400 + c for c in (*range(0x00, 0x09), 0x0b, 0x0c, *range(0x0e, 0x20))} | {0x7f: 0x2421}


def _e(value: Any) -> str:
    return html.escape("" if _missing(value) else str(value)).translate(_PICTURES)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _num(value: Any, digits: int = 4) -> str:
    return "n/a" if _missing(value) else f"{float(value):.{digits}f}"


def _list(value: Any) -> list:
    """A list column as logged (a list in memory, JSON text in ``examples.json``)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return list(value) if isinstance(value, (list, tuple)) else []


def keywords(value: Any) -> list[str]:
    """The judge's keywords of a text as the table holds them (space-separated, or a list)."""
    if isinstance(value, str) and not value.startswith("["):
        return value.split()
    return [str(k) for k in _list(value)]


def highlight(text: str | None, keywords: list[str], css: str) -> str:
    """``text`` escaped, each occurrence of a keyword wrapped in ``<mark class=css>`` (longest
    keywords first, never overlapping; Latin letters matched regardless of case)."""
    if not isinstance(text, str) or not text:  # (a failed call has no answer: null, NaN in the table)
        return ""
    lower = text.lower()
    taken = [False] * len(text)
    spans = []
    for word in sorted({k for k in keywords if k and k.strip()}, key=len, reverse=True):
        start = lower.find(word.lower())
        while start >= 0:
            end = start + len(word)
            if not any(taken[start:end]):
                spans.append((start, end))
                taken[start:end] = [True] * (end - start)
            start = lower.find(word.lower(), end)
    out, cursor = [], 0
    for start, end in sorted(spans):
        out += [_e(text[cursor:start]), f'<mark class="{css}">', _e(text[start:end]), "</mark>"]
        cursor = end
    return "".join(out) + _e(text[cursor:])


def _page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def _table(headers: list[str], rows: list[list[str]], numeric: AbstractSet[int] = frozenset(), css: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    lines = ["".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
             for row in rows]
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>' + \
        "".join(f"<tr>{line}</tr>" for line in lines) + "</tbody></table>"


def _verdict(value: Any) -> str:
    if _missing(value):
        return '<span class="note">not judged</span>'
    return '<span class="pass">pass</span>' if int(value) == 1 else '<span class="fail">fail</span>'


def _scores(row: dict[str, Any], columns: list[str]) -> str:
    return "".join(f'<div class="sc">{_e(c)} {_num(row.get(c), 3)}</div>' for c in columns if not _missing(row.get(c)))


def _contexts(row: dict[str, Any], matched: list[str]) -> str:
    contexts = _list(row.get("contexts"))
    if not contexts:
        return '<span class="note">none</span>'
    items = "".join(f'<div class="ctx">[{_e(c.get("source") or "?")}{" " + _e(c.get("id")) if c.get("id") else ""}] '
                    f'{highlight(c.get("text"), matched, "hit")}</div>' for c in contexts if isinstance(c, dict))
    return f"<details><summary>{len(contexts)} context{'s' if len(contexts) != 1 else ''}</summary>{items}</details>"


def score_columns(table: pd.DataFrame, ks: list[int], own: dict[str, str] | None = None) -> list[str]:
    """The per-example score columns a page shows (:func:`ragmem.metrics.catalogue.per_example`: ranking
    at the largest k, the metrics of one's own), those the table has."""
    return [c for c in catalogue.per_example(ks, own or {}) if c in table.columns and table[c].notna().any()]


def _ks(params: dict[str, Any]) -> list[int]:
    return [int(k) for k in str(params.get("ranking.k", "")).split(",") if k.strip().isdigit()]


def shown_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``table`` a run's page may show: the first 100 failures, the :func:`worst` and
    the :func:`disputed` examples; of a streamed run's chunks, the rows of each added to those kept
    before (the page of the union is the page of the whole table)."""
    failed = table["error"].notna() | (table["judge_error"].notna() if "judge_error" in table else False)
    keep = set(table.index[failed][:100]) | set(worst(table).index) | set(disputed(table).index)
    return table[table.index.isin(keep)].reset_index(drop=True)


WORST_BY = catalogue.WORST_BY  # (declared with the metrics' facts)


def worst_by(table: pd.DataFrame) -> str | None:
    """The score :func:`worst` ranks by (:data:`WORST_BY`), or ``None`` when the run has none of them."""
    return next((c for c in WORST_BY if c in table and pd.to_numeric(table[c], errors="coerce").notna().any()), None)


def worst(table: pd.DataFrame, limit: int = WORST) -> pd.DataFrame:
    """Failed calls first, then failed judgements, then failed verdicts (no verdict: neither a failure nor
    a pass, as without references), then the lowest :func:`worst_by` score."""
    by = worst_by(table)
    verdict = pd.to_numeric(table["verdict"], errors="coerce").astype(float) if "verdict" in table else None
    order = pd.DataFrame({
        "error": table["error"].isna() if "error" in table else True,
        "judged": table["judge_error"].isna() if "judge_error" in table else True,
        "verdict": verdict.fillna(0.5) if verdict is not None else 2,
        "score": pd.to_numeric(table[by], errors="coerce").fillna(2) if by else 2,
    })
    return table.loc[order.sort_values(["error", "judged", "verdict", "score"], kind="stable").index[:limit]]


def _example_rows(rows: pd.DataFrame, columns: list[str]) -> list[list[str]]:
    out = []
    for row in rows.to_dict("records"):
        ref_kw, gen_kw = keywords(row.get("kw_reference")), keywords(row.get("kw_generated"))
        in_ref, in_gen = set(ref_kw), set(gen_kw)
        matched = [k for k in gen_kw if k in in_ref]
        missing = [k for k in ref_kw if k not in in_gen]
        reason = next((r for r in (row.get("error"), row.get("judge_error"), row.get("judge_reason")) if not _missing(r)), None)
        out.append([_e(row["id"]), _e(row.get("query")),
                    highlight(row.get("generated_answer"), matched, "hit") or '<span class="note">no answer</span>',
                    highlight(row.get("reference_answer"), missing, "miss"),
                    _contexts(row, matched), f"{_verdict(row.get('verdict'))}<br><span class=\"note\">{_e(reason)}</span>",
                    _scores(row, columns)])
    return out


def _latency_svg(seconds: pd.Series) -> str:
    """A histogram of the measured latencies (s), 30 bins, p50 and p95 marked."""
    values = seconds.dropna().astype(float).tolist()
    if not values:
        return '<p class="note">latency not measured (answers replayed from the data)</p>'
    values.sort()
    low, high = values[0], values[-1]
    width, height, bins = 640, 160, 30
    span = (high - low) or 1e-3
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - low) / span * bins))] += 1
    peak = max(counts)
    bar = width / bins
    rects = "".join(f'<rect x="{i * bar:.1f}" y="{height - c / peak * (height - 10):.1f}" width="{bar - 1:.1f}" '
                    f'height="{c / peak * (height - 10):.1f}" fill="#7aa7e0"><title>{c}</title></rect>'
                    for i, c in enumerate(counts) if c)

    def quantile(q: float) -> float:
        return values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))]

    marks = "".join(f'<line x1="{(quantile(q) - low) / span * width:.1f}" x2="{(quantile(q) - low) / span * width:.1f}" '
                    f'y1="0" y2="{height}" stroke="{color}" stroke-dasharray="4 3"/>' for q, color in ((0.5, "#137333"), (0.95, "#b3261e")))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 18}" role="img">'
            f'<rect width="{width}" height="{height}" fill="#fafbfc"/>{rects}{marks}'
            f'<text x="0" y="{height + 14}" font-size="11">{low:.4g} s</text>'
            f'<text x="{width}" y="{height + 14}" font-size="11" text-anchor="end">{high:.4g} s</text></svg>'
            f'<p class="note">{len(values)} calls; p50 {quantile(0.5):.4g} s (green), p95 {quantile(0.95):.4g} s (red), '
            f'max {high:.4g} s</p>')


def _metrics_table(summary: dict[str, Any], names: list[str]) -> str:
    """Each metric with its interval and the examples it was scored on (``5 of 16``, marked partial
    below ``report.min_coverage``, with the main reason)."""
    ci, coverage, partial = summary.get("ci", {}), summary.get("coverage", {}), summary.get("partial", {})
    params = summary.get("params", {})
    llm, own = str(params.get("judge.type", "keyword")) != "keyword", catalogue.own_of(params)
    rows = []
    for name in names:
        value = summary["metrics"].get(name)
        interval = ci.get(name)
        shown_ci = f"[{_num(interval[0])}, {_num(interval[1])}]" if interval else ""
        c = coverage.get(name)
        scored = "" if c is None else f"{c['scored']} of {c['of']}"
        if name in partial:
            scored = f'<span class="fail" title="{_e(partial[name])}">{scored}, partial</span>'
        if catalogue.is_seconds(name) and not _missing(value):  # seconds, as everywhere
            rows.append([_e(f"{name} (s)"), f"{value:.4g}",
                         f"[{interval[0]:.4g}, {interval[1]:.4g}]" if interval else "", scored])
        else:
            marked = " (keyword)" if catalogue.keyword_based(name, llm, own) else ""  # (word overlap, not meaning)
            rows.append([_e(name + marked), _num(value), shown_ci, scored])
    out = _table(["metric", "value", "95% interval", "scored on"], rows, {1, 2, 3})
    if any(catalogue.keyword_based(n, llm, own) for n in names):
        out += ('<p class="note">(keyword): the offline judge\'s word overlap, not what the name says; '
                'judge.type llm for verdicts, faithfulness and relevance that mean it</p>')
    if partial:
        out += ('<p class="note"><span class="fail">partial</span>: scored on less than '
                f'{_e(run_setting(summary.get("params", {}), "report.min_coverage"))} of the examples: '
                + "; ".join(f"{_e(n)} {_e(why)}" for n, why in partial.items()) + "</p>")
    return out


def _metric_failures(summary: dict[str, Any], table: pd.DataFrame) -> list[str]:
    """The metrics whose judge replies failed: how many, and each example with its reason (the first
    100; a streamed run's page holds the rows it kept)."""
    out = []
    for metric, n in failed_replies(summary["metrics"]).items():
        column = f"{metric}_error"
        rows = table[table[column].notna()].head(100) if column in table else table.head(0)
        out += [f"<h3>{_e(metric)}: {n} failed {'reply' if n == 1 else 'replies'}</h3>",
                _table(["id", "query", "reason"], [[_e(r["id"]), _e(r.get("query")), f'<span class="err">{_e(r.get(column))}</span>']
                                                   for r in rows.to_dict("records")])]
    return out


def _signatures(params: dict[str, Any]) -> str:
    """The settings that produced the numbers (judge, keywords, ranking, generation, bootstrap), folded."""
    rows = [[_e(k), _e(v)] for k, v in sorted(params.items()) if k.endswith(".signature")]
    if not rows:
        return ""
    return f'<details><summary>signatures of the settings</summary>{_table(["setting", "signature"], rows)}</details>'


def headline(summary: dict[str, Any]) -> list[str]:
    """The system's figures a page shows first, in the summary's order: those the catalogue calls
    headline (:func:`ragmem.metrics.catalogue.shown`), the ranking ones at the largest k, that have a value."""
    metrics, params = summary["metrics"], summary.get("params", {})
    ks, own = _ks(params), catalogue.own_of(params)
    return [n for n in catalogue.summary_order(metrics, own) if metrics.get(n) is not None
            and catalogue.section(n) == SYSTEM and catalogue.shown(n, ks, own) and not catalogue.is_count(n)
            and not catalogue.is_total(n)]


def run_page(summary: dict[str, Any], table: pd.DataFrame, latency_s: pd.Series | None = None,
             by_file: dict | None = None) -> str:
    """The run's ``report.html``. ``table`` is the run's, or (a streamed run) the rows it may show
    (:func:`shown_rows`), with ``latency_s`` (every example's) and ``by_file``
    (:func:`file_pass_counts` of every chunk, added)."""
    params = summary.get("params", {})
    columns = score_columns(table, _ks(params), catalogue.own_of(params))
    run = f"run {summary['run_id'][:8]}" if summary.get("run_id") else "untracked run"
    body = [f"<h1>{_e(summary['experiment'])}: {_e(run)}</h1>",
            f'<p class="meta">{summary["n_examples"]} examples, {summary["n_errors"]} with errors; data '
            f'{_e(params.get("data.path"))} (sha256 {_e(str(params.get("data.sha256", ""))[:12])}); judge '
            f'{_e(params.get("judge.type"))}; ragmem {_e(params.get("ragmem.version"))}</p>',
            _signatures(params),
            "<h2>Headline metrics</h2>", _metrics_table(summary, headline(summary))]
    body += _reliability(summary, table)
    if summary.get("gates"):
        body += ["<h2>Quality gates</h2>", _table(["metric", "value", "bar", "outcome"], [
            [_e(g["metric"]), _num(g["value"]),
             _e(f"max_regression {g['max_regression']:g} vs {str(g['baseline'])[:8]}" if g.get("max_regression") is not None
                else " ".join(f"{k} {g[k]:g}" for k in ("min", "max") if g.get(k) is not None)),
             '<span class="pass">passed</span>' if g["passed"] else '<span class="fail">failed</span>']
            for g in summary["gates"]], {1})]
    failed = table[table["error"].notna() | table["judge_error"].notna()] if "judge_error" in table else table[table["error"].notna()]
    by_metric = _metric_failures(summary, table)
    replies = sum(failed_replies(summary["metrics"]).values())
    body.append(f"<h2>Failures ({summary['n_errors']}" + (f"; {replies} failed metric replies" if replies else "") + ")</h2>")
    if len(failed):
        body.append(_table(["id", "query", "agent error", "judge error"],
                           [[_e(r["id"]), _e(r.get("query")), f'<span class="err">{_e(r.get("error"))}</span>',
                             f'<span class="err">{_e(r.get("judge_error"))}</span>'] for r in failed.head(100).to_dict("records")]))
    body += by_metric
    if not len(failed) and not by_metric:
        body.append('<p class="note">none: every agent call, every judgement and every metric\'s reply succeeded</p>')
    shown, by = worst(table), worst_by(table) or "score"
    passed = int((pd.to_numeric(shown["verdict"], errors="coerce") == 1).sum()) if "verdict" in shown else 0
    body += [f"<h2>Worst examples ({len(shown)} of {summary['n_examples']}"
             + (f"; {passed} of them passed, shown for their low {by.replace('_', ' ')}" if passed else "") + ")</h2>",
             f'<p class="note">failed calls first, then failed verdicts, then the lowest {_e(by)} (the first of '
             f'{", ".join(WORST_BY)} the run has; a passed one labelled <span class="pass">pass</span>); '
             '<mark class="hit">matched</mark> keywords in the answer and contexts, '
             '<mark class="miss">missed</mark> ones in the reference</p>',
             _table(["id", "query", "answer", "reference", "contexts", "verdict", "scores"],
                    _example_rows(shown, columns), css="ex")]
    body += ["<h2>Per source</h2>", _per_source(summary, file_pass_counts(table) if by_file is None else by_file)]
    latency_s = table["latency_s"] if latency_s is None and "latency_s" in table else latency_s
    body += ["<h2>Latency</h2>", _latency_svg(latency_s) if latency_s is not None else ""]
    notes = summary.get("notes") or []
    if notes:
        body += ["<h2>Notes</h2>", "<ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>"]
    return _page(f"ragmem report {summary.get('run_id') or ''}", body)


def disputed(table: pd.DataFrame, limit: int = WORST) -> pd.DataFrame:
    """The examples where the judge disagrees with the label, then those whose samples disagree
    with each other (least self-agreement first)."""
    if "verdict" not in table:
        return table.iloc[:0]
    verdict = pd.to_numeric(table["verdict"], errors="coerce")
    label = pd.to_numeric(table["label"], errors="coerce") if "label" in table else verdict * float("nan")
    agreement = pd.to_numeric(table["judge_agreement"], errors="coerce") if "judge_agreement" in table else verdict * float("nan")
    against_label = label.notna() & verdict.notna() & (label != verdict)
    against_itself = agreement.notna() & (agreement < 1)
    order = pd.DataFrame({"label": ~against_label, "self": agreement.fillna(1.0)}, index=table.index)
    picked = order[against_label | against_itself].sort_values(["label", "self"], kind="stable")
    return table.loc[picked.index].head(limit)


def _reliability(summary: dict[str, Any], table: pd.DataFrame) -> list[str]:
    """The judge reliability section: the unreliable line, the figures, the disputed examples."""
    shown = [n for n in catalogue.judge_section(catalogue.summary_order(summary["metrics"]))
             if summary["metrics"].get(n) is not None]
    if not shown:
        return []
    body = ["<h2>Judge reliability</h2>"]
    if summary.get("judge_unreliable"):
        body.append(f'<p class="fail">{_e(summary["judge_unreliable"])}</p>')
    body += ['<p class="note">How far the judge can be trusted: its agreement with the labels and with itself '
             '(not the system\'s quality); pass_rate_ppi, among the headline metrics, is the share a human would '
             'pass, with its prediction-powered interval</p>', _metrics_table(summary, shown)]
    rows = disputed(table)
    if len(rows):
        body += [f'<p class="note">{len(rows)} examples where the judge disagrees with the label or with itself, '
                 'those against the label first</p>',
                 _table(["id", "query", "answer", "reference", "label", "verdict", "samples agreeing", "reason"],
                        [[_e(r["id"]), _e(r.get("query")), _e(r.get("generated_answer")), _e(r.get("reference_answer")),
                          _e(r.get("label")), _verdict(r.get("verdict")),
                          _num(r.get("judge_agreement"), 2) if not _missing(r.get("judge_agreement")) else "",
                          _e(r.get("judge_reason") or r.get("judge_error"))] for r in rows.to_dict("records")],
                        css="ex")]
    return body


def file_pass_counts(table: pd.DataFrame) -> dict[tuple[str, str], float]:
    """Per data file: its examples (``(file, "n")``), its judged ones (``"judged"``) and their
    passes (``"passed"``): counts that chunks add up (the report's pass rate per file)."""
    out: dict[tuple[str, str], float] = {}
    if "source_file" not in table:
        return out
    verdict = pd.to_numeric(table["verdict"], errors="coerce") if "verdict" in table else pd.Series(float("nan"), index=table.index)
    for name, group in verdict.groupby(table["source_file"], sort=True):
        out[(name, "n")], out[(name, "judged")], out[(name, "passed")] = len(group), float(group.notna().sum()), float(group.sum())
    return out


def _per_source(summary: dict[str, Any], by_file: dict[tuple[str, str], float]) -> str:
    metrics = summary["metrics"]
    kinds = ("context_share", "coverage", "reference_coverage", "hit_rate")
    rows = [[_e(s), *[_num(metrics.get(f"{k}_{s}")) for k in kinds]] for s in CONTEXT_SOURCES
            if any(metrics.get(f"{k}_{s}") is not None for k in kinds)]
    parts = [_table(["context source", *kinds], rows, {1, 2, 3, 4}) if rows else
             '<p class="note">the contexts carry no source (rag, memory_short, memory_long)</p>']
    names = sorted({name for name, _ in by_file})
    if len(names) > 1:
        parts.append(_table(["data file", "examples", "pass rate"],
                            [[_e(name), str(int(by_file[(name, "n")])),
                              _num(by_file[(name, "passed")] / by_file[(name, "judged")] if by_file[(name, "judged")] else None)]
                             for name in names], {1, 2}))
    return "".join(parts)
