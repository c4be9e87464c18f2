"""The metric catalogue, read: the facts of any output name a run can print (:func:`facts`), and every
view of the metrics derived from them — which way is better, what is a count, what the terminal table
and the report show, which per-example scores go back onto traces, what a window is compared on,
which columns ``compare`` lists, the order of a summary and the key MLflow logs a figure under.

The facts themselves are declared once, with the names, in :mod:`ragmem.metrics.names`. Nothing here
guesses from a name's spelling: a name no family declares and no rule below covers has no facts
(``None``), and its direction is the default one, higher is better, as for a metric of one's own.

Rules for the names a family does not declare, from their shape (declared here, once):

- ``n_*``, ``undefined_*``, ``*_errors``, ``*_failures``: counts (no direction);
- ``{metric}_pass_rate``: the share of examples where ``metric`` passed: its metric's direction and
  needs, not a headline figure.

Metrics of one's own (``metrics.custom``) are named by the config: their facts are
:data:`ragmem.metrics.names.OWN` with the direction the config declares, passed as ``own``
(name -> ``"higher"`` or ``"lower"``; :func:`own_of` reads it back from a run's params).

>>> facts("judge_cost_usd").direction, lower_is_better("judge_flip_rate"), lower_is_better("ndcg_at_10")
('lower', True, False)
>>> lower_is_better("order_id_format", own={"order_id_format": "lower"}), is_count("undefined_f1")
(True, True)
"""

from __future__ import annotations

import functools
import re
from types import MappingProxyType
from typing import Iterable, Mapping, Sequence

from ragmem.metrics import names
from ragmem.metrics.names import HIGHER, JUDGE, LOWER, Metric, OWN, SYSTEM

__all__ = ["facts", "family_of", "direction", "lower_is_better", "is_count", "is_seconds", "shown", "section",
           "per_example", "watched", "listed", "summary_order", "metric_key", "metric_name", "own_of", "catalogued",
           "of_column", "mean_of", "judge_section", "is_total",
           "JUDGE_FIGURES", "beside_objective", "reported"]

Own = Mapping[str, str]
_NONE: Own = MappingProxyType({})  # no metric of one's own (a default that cannot be changed)
_COUNT = re.compile(r"^(n_|undefined_|confusion_).+|.+_(errors|failures)$")
#: the order of a summary, by family: the headline (pass rate, coverage, latency), ranking,
#: generation, the LLM metrics, per source, a conversation's, one's own, then the judge (against the
#: labels, its reliability), then what the endpoints cost
_ORDER = ("verdicts", "coverage", "latency", "ranking", "generation", "rag", "rubric", "per_source", "conversation",
          "custom", "classification", "reliability", "memory_bench", "usage")


def _declared(name: str) -> tuple[str, Metric] | None:
    return _declared_in(id(names.KNOWN), name)


@functools.lru_cache(maxsize=8192)
def _declared_in(known: int, name: str) -> tuple[str, Metric] | None:
    """``name``'s family and facts among the declared families (``known``: the identity of
    ``names.KNOWN``, so a catalogue extended at run time is looked up afresh). Cached: the lookup sits
    on the per-example path (:func:`ragmem.metrics.needs.lacks`)."""
    for family in names.KNOWN:
        found = family.facts(name)
        if found is not None:
            return family.family, found
    return None


def _resolved(name: str, own: Own) -> tuple[str, Metric] | None:
    declared = _declared(name)
    if declared is not None:
        return declared
    if name in own:
        return "custom", OWN.but(name=name, column=name, direction=LOWER if own[name] == LOWER else HIGHER)
    if _COUNT.match(name):
        return "count", Metric(name, direction=None, unit="count", headline=False)
    base = name.removesuffix("_pass_rate")
    if base != name and (found := _resolved(base, own)) is not None:
        return found[0], found[1].but(name=name, unit="share", headline=False, column=None, watched=False, listed=False)
    return None


def facts(name: str, own: Own = _NONE) -> Metric | None:
    """The facts of the output name ``name`` (``None``: no family declares it and no rule covers it).

    >>> facts("retrieve_latency_p95").unit, facts("faithfulness_pass_rate").headline, facts("banana")
    ('seconds', False, None)
    """
    found = _resolved(name, own)
    return None if found is None else found[1]


def family_of(name: str, own: Own = _NONE) -> str | None:
    """The family that gives ``name`` (``count`` for a count no family declares), or ``None``."""
    found = _resolved(name, own)
    return None if found is None else found[0]


def mean_of(name: str, own: Own = _NONE) -> str | None:
    """The per-example column whose mean is ``name``'s value, a score (what a confidence sequence can
    follow example by example: :mod:`ragmem.stats.sequential`), or ``None``.

    >>> mean_of("pass_rate"), mean_of("avg_coverage"), mean_of("bleu"), mean_of("latency_p95")
    ('verdict', 'coverage', None, None)
    """
    found = facts(name, own)
    return found.column if found is not None and found.unit == "score" and not found.corpus else None


#: the families the judge scores: an LLM reads them, a keyword judge only counts shared words
JUDGED = ("verdicts", "rag", "rubric", "conversation")


def keyword_based(name: str, asks_llm: bool, own: Own = _NONE) -> bool:
    """Whether ``name``'s value is word overlap rather than what its name says: a judged family's
    metric (:data:`JUDGED`) scored without an LLM judge."""
    return not asks_llm and family_of(name, own) in JUDGED


def of_column(column: str) -> str:
    """The metric whose per-example column is ``column`` (``coverage`` -> ``avg_coverage``), else ``column``."""
    return _columns(id(names.KNOWN)).get(column, column)


@functools.lru_cache(maxsize=8)
def _columns(known: int) -> dict[str, str]:
    return {m.column: m.name for family in reversed(names.KNOWN) for m in reversed(family.metrics) if m.column}


def catalogued(name: str, own: Own = _NONE) -> bool:
    return _resolved(name, own) is not None


def direction(name: str, own: Own = _NONE) -> str | None:
    """``"higher"`` or ``"lower"`` is better, or ``None`` (a count, a diagnostic); a name the
    catalogue does not hold: higher, as a metric of one's own by default."""
    found = facts(name, own)
    return HIGHER if found is None else found.direction


def lower_is_better(name: str, own: Own = _NONE) -> bool:
    """Whether a smaller value of ``name`` is the better one (latencies, costs, tokens, flip rates)."""
    return direction(name, own) == LOWER


def is_count(name: str) -> bool:
    """Whether an output name is a count (printed as an integer, never ``147.0000``).

    >>> [is_count(n) for n in ("judge_calls", "n_labelled", "undefined_f1", "pass_rate", "judge_cost_usd")]
    [True, True, True, False, False]
    """
    found = facts(name)
    return found is not None and found.unit == "count"


def is_total(name: str) -> bool:
    """Whether ``name`` is what an endpoint cost (calls, tokens, dollars: ``judge_cost_usd``), a total of
    the run measured as it ran: never computed from the examples, gated as the two runs' totals."""
    return family_of(name) == "usage"


def is_seconds(name: str) -> bool:
    """Whether ``name`` is in seconds (a latency, an ingest time)."""
    found = facts(name)
    return found is not None and found.unit == "seconds"


def _largest_k(name: str, ks: Sequence[int]) -> bool:
    at_k = names.AT_K.match(name)
    return at_k is None or not ks or int(at_k.group(2)) == max(ks)


def shown(name: str, ks: Sequence[int] = (), own: Own = _NONE) -> bool:
    """Whether the terminal table and the report show ``name`` by default (the rest with ``--all``,
    and always in the summary JSON and MLflow): a headline figure, and of the ranking metrics those
    at the largest k of ``ks``. A name the catalogue does not hold is shown (one's own)."""
    found = facts(name, own)
    return (found is None or found.headline) and _largest_k(name, ks)


def section(name: str) -> str:
    """Where ``name`` is shown: among the system's figures, or under "judge reliability"."""
    found = facts(name)
    return SYSTEM if found is None else found.section


def per_example(ks: Sequence[int], own: Own = _NONE) -> list[str]:
    """The per-example score columns a run may have, in the summary's order: shown on the report's
    examples and written back onto traces as assessments (ranking at the largest k of ``ks``; every
    metric of one's own), besides the verdict (pass_rate's column), which both show with its reason."""
    k = max(ks) if ks else 10
    ranked = [f"{family}_at_{k}" for family in names.RANKING_FAMILIES]
    columns = [(m.name, m.column) for family in names.KNOWN if family is not names.VERDICTS for m in family.metrics] + \
        [(n, facts(n).column) for n in ranked] + [(n, n) for n in own]  # type: ignore[union-attr]
    return [column for name, column in _ordered(columns, own) if column]


#: the families a run computes whatever its selection (the verdicts, the latencies)
_EVERY_RUN = ("verdicts", "latency")


def watched(selected: Iterable[str], own: Own = _NONE, without: Sequence[str] = ()) -> list[str]:
    """The names a window of traffic is compared on: the watched ones of ``selected``, of the families
    every run computes and of one's own, leaving out those that need a field in ``without`` (traffic
    has no reference answers)."""
    always = [m.name for family in names.KNOWN if family.family in _EVERY_RUN for m in family.metrics]
    chosen = [n for n in (*always, *selected, *own) if (f := facts(n, own)) is not None and f.watched
              and not set(f.needs) & set(without)]
    return [name for name, _ in _ordered([(n, n) for n in dict.fromkeys(chosen)], own)]


def listed() -> list[str]:
    """The metric columns ``ragmem compare``'s table of runs shows beside the one it sorts by: in the
    summary's order, the times last."""
    declared = [m.name for family in names.KNOWN for m in family.metrics if m.listed]
    ranked = [n for n in (f"{f}_at_10" for f in names.RANKING_FAMILIES) if facts(n).listed]  # type: ignore[union-attr]
    return sorted(summary_order(declared + ranked), key=is_seconds)


#: what a report ranks its worst examples by after the failures and the verdicts: the first of these
#: columns the run has a value of (with reference answers, their coverage; traffic without: faithfulness)
WORST_BY = ("reference_coverage", "faithfulness", "answer_relevancy", "context_relevance", "coverage")


def sorted_by(present: Iterable[str]) -> str:
    """What a table of runs sorts by when not told: the first listed quality metric the runs have
    (pass_rate, reference_coverage, ...), else the first watched one (faithfulness, answer_relevancy,
    ...: traffic without references), else pass_rate."""
    found = set(present)
    every = [m.name for family in names.KNOWN for m in family.metrics]
    return next((n for n in (*listed(), *watched(every)) if n in found and not is_seconds(n)), "pass_rate")


#: what ``compare`` shows of each run's judge besides the paired rows (pass_rate_ppi is not paired:
#: its interval is each run's own)
JUDGE_FIGURES = ("pass_rate_ppi", "n_labelled", "judge_label_kappa", "judge_flip_rate")


def beside_objective(ks: Sequence[int] = ()) -> list[str]:
    """What a sweep's table and plots show beside its objective: the context the answers rest on, the
    ranking at the largest k, the time.

    >>> beside_objective((1, 5))
    ['reference_coverage', 'hit_rate_at_5', 'mrr_at_5', 'avg_latency']
    """
    k = max(ks) if ks else 10
    return ["reference_coverage", f"hit_rate_at_{k}", f"mrr_at_{k}", "avg_latency"]


def reported(name: str) -> bool:
    """Whether ``name`` is a figure to compare runs on (not a count, an interval's end, an endpoint's usage)."""
    base = metric_name(name)
    return not base.endswith(("_ci_low", "_ci_high")) and not is_count(base) and not is_total(base)


def _ordered(pairs: list[tuple[str, str | None]], own: Own) -> list[tuple[str, str | None]]:
    order = summary_order([n for n, _ in pairs], own)
    by_name = dict(pairs)
    return [(n, by_name[n]) for n in order]


def summary_order(metrics: Iterable[str], own: Own = _NONE) -> list[str]:
    """``metrics`` in the order the summary shows them (by family, see ``_ORDER``; within a family, as
    the default selection lists them; anything else last, by name).

    >>> summary_order(["f1", "bleu", "ndcg_at_10", "pass_rate", "avg_coverage", "answer_correctness"])
    ['pass_rate', 'avg_coverage', 'ndcg_at_10', 'bleu', 'answer_correctness', 'f1']
    """
    canonical = {name: i for i, name in enumerate(names.expand_selection(list(names.DEFAULT_METRICS), names.DEFAULT_KS))}

    def key(name: str) -> tuple:
        family = family_of(name, own)
        rank = _ORDER.index(family) if family in _ORDER else len(_ORDER)
        return rank, canonical.get(name, len(canonical)), name

    return sorted(metrics, key=key)


def metric_key(name: str) -> str:
    """The name a metric is logged under in MLflow: scores under their own name, counts under
    ``count/`` (``n_*``, ``undefined_*``, ``confusion_*``, ``*_errors``, ``*_failures``), the usage of an
    endpoint under ``usage/`` (``judge_calls``, ``judge_failures``, tokens, cost, cache hits) and the
    judge's reliability under ``judge/`` (``judge_label_kappa`` -> ``judge/label_kappa``), so
    the UI's metric list and charts show the scores first and the counts apart.

    >>> metric_key("judge_cost_usd"), metric_key("n_errors"), metric_key("judge_flip_rate_ci_low")
    ('usage/judge_cost_usd', 'count/n_errors', 'judge/flip_rate_ci_low')
    """
    if name.startswith("n_scored/"):  # how many examples a score rests on: beside the score's own name
        return name
    if is_total(name):
        return f"usage/{name}"
    if is_count(name):
        return f"count/{name}"
    base = re.sub(r"_ci_(low|high)$", "", name)
    if family_of(base) == "reliability" and base.startswith("judge_"):  # judge_label_kappa -> judge/label_kappa
        return f"judge/{name[len('judge_'):]}"
    return name


def metric_name(key: str) -> str:
    """The inverse of :func:`metric_key`."""
    if key.startswith("judge/"):
        return "judge_" + key[len("judge/"):]
    return key.split("/", 1)[1] if key.startswith(("count/", "usage/")) else key


def own_of(params: Mapping[str, str]) -> dict[str, str]:
    """A run's metrics of one's own and their directions, from its params (``metrics.custom.<name>``:
    the signature, which says ``better:lower`` for a lower-is-better one).

    >>> own_of({"metrics.custom.refunds": "target:m:f|source:sha256:ab|args:answer|better:lower", "seed": "0"})
    {'refunds': 'lower'}
    """
    prefix = "metrics.custom."
    return {key[len(prefix):]: LOWER if "|better:lower" in str(value) else HIGHER
            for key, value in params.items() if key.startswith(prefix) and "." not in key[len(prefix):]}


def judge_section(metrics: Iterable[str], show_all: bool = False) -> list[str]:
    """The names of ``metrics`` shown under "judge reliability" (with ``show_all``: every one of that
    section, the headline ones otherwise)."""
    return [n for n in metrics if section(n) == JUDGE and (show_all or shown(n))]
