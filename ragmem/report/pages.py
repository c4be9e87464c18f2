"""The pages of runs read back from the tracking store (``ragmem report``): a run's ``report.html``
rebuilt from its artifacts, or ``diff.html``, run B against run A example by example, with the
latest pairwise judging of the two when there is one. The pages' parts are :mod:`ragmem.report.html`."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ragmem.report.html import (
    _e, _ks, _missing, _num, _page, _table, _verdict, MOVED, run_page, score_columns,
)
from ragmem.tracking.compare import compare_tables, compared_names
from ragmem.tracking.runs import known_metrics, latest_pairwise, load_run_table, resolve_run_id, run_summary


def diff_page(comparison: dict[str, Any], a: pd.DataFrame, b: pd.DataFrame,
              pairwise: dict[str, Any] | None = None) -> str:
    """``diff.html``: run B against run A, example by example (matched by id); with the latest
    pairwise comparison of the two (``pairwise``), the examples B won and lost, side by side."""
    ks = _ks(a.attrs.get("params", {}))
    columns = [c for c in score_columns(a, ks) if c in b.columns]
    merged = a.merge(b, on="id", suffixes=("_a", "_b"))
    body = [f"<h1>Run {_e(comparison['run_b'][:8])} (B) against {_e(comparison['run_a'][:8])} (A)</h1>",
            f'<p class="meta">{comparison["n_shared"]} shared examples; {_e(comparison["test"])}, '
            f'{comparison["resamples"]} resamples</p>']
    def scored_on(r) -> str:  # the examples each side was scored on; a partial side in red, with why
        cells = []
        for side in ("a", "b"):
            c = r.get(f"coverage_{side}")
            why = (r.get("partial") or {}).get(side.upper())
            text = "" if c is None else f"{side.upper()} {c['scored']} of {c['of']}"
            cells.append(f'<span class="fail" title="{_e(why)}">{_e(text)}, partial</span>' if why else _e(text))
        return "; ".join(c for c in cells if c)

    rows = [[_e(r["metric"]), _num(r["a"]), _num(r["b"]),
             "n/a" if r["diff"] is None else f'<span class="{"up" if r["diff"] > 0 else "down" if r["diff"] < 0 else ""}">{r["diff"]:+.4f}</span>',
             "n/a" if r["ci_low"] is None else f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]",
             "n/a" if r["p_value"] is None else f"{r['p_value']:.4f}",
             "n/a" if r.get("p_holm") is None else f"{r['p_holm']:.4f}{' *' if r.get('marked') else ''}",
             "" if r.get("marked") or r.get("min_detectable") is None else f"{r['min_detectable']:.4f}",
             scored_on(r)]
            for r in comparison["metrics"]]
    body += ["<h2>Metrics, B - A</h2>",
             _table(["metric", "A", "B", "B - A", "95% CI", "p-value", "p (Holm)", "detectable", "scored on"], rows,
                    {1, 2, 3, 4, 5, 6, 7}),
             '<p class="note">* marked: the paired-bootstrap interval excludes 0 and p stays below 0.05 after Holm\'s '
             'correction over the metrics compared (approximate randomization test, two-sided). detectable: beside a '
             'difference not marked, the smallest |B - A| the comparison would detect 80% of the time (from the '
             'interval\'s width): a smaller one may be there, unseen</p>']
    differ = comparison.get("settings_that_differ") or {}
    if differ:
        body.append(_table(["setting", "A", "B"], [[_e(k), _e(v[0]), _e(v[1])] for k, v in differ.items()]))
    for title, mask in (("Flipped to fail (pass in A, fail in B)", (merged["verdict_a"] == 1) & (merged["verdict_b"] == 0)),
                        ("Flipped to pass (fail in A, pass in B)", (merged["verdict_a"] == 0) & (merged["verdict_b"] == 1))):
        body += [f"<h2>{title}: {int(mask.sum())}</h2>", _pairs(merged[mask].head(MOVED), columns)]
    shown = 0
    for key in columns:  # the scores both runs have, each that moved (at most 3: the first in summary order)
        delta = (pd.to_numeric(merged[f"{key}_b"], errors="coerce") - pd.to_numeric(merged[f"{key}_a"], errors="coerce")).abs()
        moved = merged.assign(_delta=delta).sort_values("_delta", ascending=False)
        moved = moved[moved["_delta"] > 0].head(MOVED)
        if len(moved) and shown < 3:
            body += [f"<h2>Moved most in {_e(key)}: {len(moved)}</h2>", _pairs(moved, columns)]
            shown += 1
    if columns and not shown:
        body.append(f'<p class="note">no example moved in {_e(", ".join(columns))}</p>')
    if pairwise is not None:
        body += _pairwise(pairwise)
    return _page(f"ragmem diff {comparison['run_a'][:8]} {comparison['run_b'][:8]}", body)


def _pairwise(result: dict[str, Any]) -> list[str]:
    """The pairwise judge's verdicts: its figures, then the examples B won and lost, both answers
    side by side with the reasons given in each order."""
    ci = result.get("win_rate_ci")
    rate = "n/a" if result["win_rate"] is None else _num(result["win_rate"]) + (f" [{_num(ci[0])}, {_num(ci[1])}]" if ci else "")
    out = [f"<h2>Pairwise judge (run {_e(str(result.get('pairwise_run_id', ''))[:8])}): B won {result['wins']}, "
           f"tied {result['ties']}, lost {result['losses']}</h2>",
           f'<p class="meta">{_e(result["criterion"])} B\'s win rate (ties half) {rate}; swap_inconsistency '
           f'{_num(result["swap_inconsistency"])} (a verdict that changed with the order is a tie)</p>']
    for title, outcome in (("B won", "win"), ("B lost", "loss")):
        rows = [r for r in result["rows"] if r.get("outcome") == outcome][:MOVED]
        cells = [[_e(r["id"]), _e(r["query"]), _e(r["reference_answer"]), _e(r["answer_a"]), _e(r["answer_b"]),
                  f"A first: {_e(r.get('verdict_a_first'))}, {_e(r.get('reason_a_first'))}<br>"
                  f"B first: {_e(r.get('verdict_b_first'))}, {_e(r.get('reason_b_first'))}"] for r in rows]
        out += [f"<h3>{title}: {sum(r.get('outcome') == outcome for r in result['rows'])}</h3>",
                _table(["id", "query", "reference", "A", "B", "judge (answer 1 is the first)"], cells, css="ex")
                if cells else '<p class="note">none</p>']
    return out


def _delta(name: str, a: Any, b: Any) -> str:
    """A score from A to B: the ones that moved marked (up or down, bold), the others dimmed."""
    shown = f"{_e(name)} {_num(a, 3)} &rarr; {_num(b, 3)}"
    if _missing(a) or _missing(b) or abs(float(b) - float(a)) < 5e-4:
        return shown if _missing(a) != _missing(b) else f'<span class="note">{shown}</span>'
    return f'<b class="{"up" if float(b) > float(a) else "down"}">{shown}</b>'


def _pairs(rows: pd.DataFrame, columns: list[str]) -> str:
    if rows.empty:
        return '<p class="note">none</p>'
    out = []
    for r in rows.to_dict("records"):
        deltas = "<br>".join(_delta(c, r.get(f"{c}_a"), r.get(f"{c}_b")) for c in columns
                             if not (_missing(r.get(f"{c}_a")) and _missing(r.get(f"{c}_b"))))
        out.append([_e(r["id"]), _e(r.get("query_a")), _e(r.get("reference_answer_a")),
                    f"{_verdict(r.get('verdict_a'))}<br>{_e(r.get('generated_answer_a'))}",
                    f"{_verdict(r.get('verdict_b'))}<br>{_e(r.get('generated_answer_b'))}", deltas])
    return _table(["id", "query", "reference", "A", "B", "scores A → B"], out, css="ex")


def from_tracking(client, runs: list[str], resamples: int = 1000, seed: int = 0) -> str:
    """The page of one logged run (rebuilt from its ``summary.json`` and ``examples.json``), or the
    diff of two (``runs``: ids or unique prefixes); ``client``: an MLflow client."""
    runs = [resolve_run_id(client, r) for r in runs]
    tables = [load_run_table(client, r) for r in runs]
    summaries = [run_summary(client, t.attrs["run"].info.run_id) for t in tables]
    for table, summary in zip(tables, summaries):
        table.attrs["params"] = summary.get("params", {})
    if len(runs) == 1:
        return run_page(summaries[0], tables[0])
    names = compared_names(known_metrics(client, runs))  # (the family ragmem compare tests: the same p-values)
    comparison = compare_tables(tables[0], tables[1], names, resamples, seed)
    return diff_page(comparison, tables[0], tables[1], latest_pairwise(client, runs[0], runs[1]))

