"""What each metric reads from an example beyond its query and answer.

An example needs a query and an answer; its reference answer and its contexts are optional
(production traffic has no reference, a chat turn may retrieve nothing). A metric that needs a field
an example lacks has no value for that example: null, counted among the examples it was not scored on
with the reason (``no reference answer``, ``no contexts``; :mod:`ragmem.metrics.scored`), never 0 and
never a rejected file. ``ragmem validate`` counts, per metric, the records that can feed it.

=========================================  ===============================
metric                                      needs
=========================================  ===============================
bleu, bleu_1, chrf, rouge_*, token_f1,      reference answer
exact_match, answer_correctness
pass_rate (keyword judge)                   reference answer
faithfulness, avg_coverage,                 contexts
context_relevance
contextual_precision                        contexts, and gold ids or a reference answer (its verdicts)
context_entity_recall, reference_coverage   reference answer and contexts
answer_relevancy                            nothing more
ranking (hit_rate_at_k, ...)                gold ids or (offline) a reference answer
knowledge_retention, earlier_turn_recall    the conversation's earlier turns (history)
=========================================  ===============================
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence

import pandas as pd

from ragmem.metrics import catalogue, names
from ragmem.metrics.names import CONTEXTS, GOLD_OR_REFERENCE, HISTORY, REFERENCE  # noqa: F401  (read here)

#: the reason an example is not scored for want of a field (the coverage line's words)
WHY = {REFERENCE: "no reference answer", CONTEXTS: "no contexts",
       GOLD_OR_REFERENCE: "no gold ids nor reference answer", HISTORY: "no earlier turns (history)"}


def needs(metric: str) -> tuple[str, ...]:
    """The fields ``metric`` (or its per-example column, its ``_pass_rate``) needs beyond query and answer.

    >>> needs("rouge_l"), needs("faithfulness_pass_rate"), needs("answer_relevancy")
    (('reference_answer',), ('contexts',), ())
    """
    return _needs(metric, id(names.KNOWN))


@functools.lru_cache(maxsize=1024)
def _needs(metric: str, known: int) -> tuple[str, ...]:
    """:func:`needs`, once per name and families' declaration (``known``: its id, as
    :func:`ragmem.metrics.catalogue.of_column` keys its own cache): the families ask it for every row
    (80,000 asks at 10k examples, 0.07 s of the run's main process before this cache)."""
    found = catalogue.facts(catalogue.of_column(metric))  # (ranking: gold ids or a reference say which
    return () if found is None else found.needs            # contexts are relevant; an empty retrieval is a miss)


def reference_free(selection: Sequence[str], ks: Sequence[int], gold: bool) -> list[str]:
    """The names of ``selection`` that need no reference answer (with ``gold``: the data has gold ids,
    so those that need gold ids or a reference stay): a dataset without references gets these by default.

    >>> reference_free(["pass_rate", "bleu", "faithfulness", "ndcg_at_k", "contextual_precision"], (1,), gold=False)
    ['pass_rate', 'faithfulness']
    """
    kept = []
    for name in selection:
        wanted = set().union(*(needs(n) for n in names.expand_selection([name], ks)))
        if REFERENCE in wanted or (GOLD_OR_REFERENCE in wanted and not gold):
            continue
        kept.append(name)
    return kept


def has(row: Any, field: str) -> bool:
    """Whether a results-table row (or an example) holds ``field``: a reference answer that is text,
    at least one context, gold ids or a reference answer."""
    if field == GOLD_OR_REFERENCE:
        gold = getattr(row, "gold_relevance", None)
        if callable(gold):  # an Example: its gold relevance from relevant_context_ids or relevance
            gold = gold()
        return isinstance(gold, dict) or has(row, REFERENCE)
    return holds(field, getattr(row, field, None))


def holds(field: str, value: Any) -> bool:
    """Whether ``value`` is a ``field`` an example holds (:func:`has`): a reference answer that is
    text, a list that is not empty, another value that is not missing (a label)."""
    if field == REFERENCE:
        return isinstance(value, str) and bool(value.strip())
    try:
        return value is not None and len(value) > 0
    except TypeError:  # (a scalar: a table's missing cell reads as NaN)
        return not (isinstance(value, float) and math.isnan(value))


def holding(table: pd.DataFrame, field: str) -> pd.Series:
    """Which rows of a results table hold ``field`` (:func:`has`, column by column; a column the table
    lacks: every row)."""
    if field == GOLD_OR_REFERENCE:
        gold = table["gold_relevance"].map(lambda g: isinstance(g, dict)) if "gold_relevance" in table.columns \
            else pd.Series(False, index=table.index)
        return gold | holding(table, REFERENCE)
    if field not in table.columns:
        return pd.Series(True, index=table.index)
    return table[field].map(lambda value: holds(field, value)).astype(bool)


def reference(row: Any) -> str:
    """A row's reference answer, ``""`` when it has none (a table's missing cell may read as NaN)."""
    value = getattr(row, REFERENCE, None)
    return value if isinstance(value, str) else ""


def lacks(row: Any, metric: str) -> str | None:
    """The first field ``metric`` needs that ``row`` lacks, or ``None``."""
    for field in needs(metric):
        if not has(row, field):
            return field
    return None


#: what ``ragmem validate`` says the metrics can be computed on: (metrics, the input they need, the
#: fields of :func:`has` a record must hold for it)
FED: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("answer_relevancy", "a query and an answer", ()),
    ("faithfulness, context_relevance, avg_coverage", "contexts", (CONTEXTS,)),
    ("bleu, chrf, rouge_*, token_f1, exact_match, answer_correctness, pass_rate with the keyword judge",
     "a reference answer", (REFERENCE,)),
    ("context_entity_recall, reference_coverage", "a reference answer and contexts", (REFERENCE, CONTEXTS)),
    ("contextual_precision", "contexts, and gold context ids or a reference answer", (CONTEXTS, GOLD_OR_REFERENCE)),
    ("hit_rate_at_k, mrr_at_k, ndcg_at_k, recall_at_k, precision_at_k, map_at_k",
     "gold context ids, or a reference answer for offline relevance", (GOLD_OR_REFERENCE,)),
    ("accuracy, precision, recall, f1, judge_label_kappa", "a label", ("label",)),
    ("knowledge_retention, earlier_turn_recall", "the conversation's earlier turns (history)", (HISTORY,)),
)


def fed_counters() -> dict[str, Callable[[Any], bool]]:
    """For each line of :data:`FED`, by its metrics: whether a record (an example) can feed them
    (:func:`ragmem.data.checking.check_file` counts the valid records with them)."""
    return {metrics: _holding_all(fields) for metrics, _, fields in FED}


def _holding_all(fields: tuple[str, ...]) -> Callable[[Any], bool]:
    return lambda example: all(has(example, x) for x in fields)


def fed(held: dict[str, int], valid: int) -> list[str]:
    """The lines of ``ragmem validate`` that say, per metric, how many of the ``valid`` records can feed
    it (``held``: counts by :data:`FED`'s metrics, as :func:`fed_counters` counted them).

    >>> print("\\n".join(fed({"faithfulness, context_relevance, avg_coverage": 12}, 20)[:3]))
    what each metric can be computed on (records that hold what it needs):
      20 of 20  answer_relevancy (a query and an answer)
      12 of 20  faithfulness, context_relevance, avg_coverage (contexts)
    """
    width = len(f"{valid:,} of {valid:,}")
    lines = ["what each metric can be computed on (records that hold what it needs):"]
    for metrics, what, fields in FED:
        n = held.get(metrics, 0) if fields else valid
        lines.append(f"  {f'{n:,} of {valid:,}':<{width}}  {metrics} ({what})")
    return lines
