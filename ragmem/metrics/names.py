"""Which metric names exist: each family's selectable names, the shapes and selectors that stand for
more of them, the default selection and how a selection expands.

A leaf without pandas or numpy: the settings schema (:mod:`ragmem.config.settings`) validates ``metrics``
with it, and each family module (:mod:`ragmem.metrics.ranking`, ...) takes its names from here, so
the names are declared once and the schema never imports the families.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Pattern, Sequence

from ragmem.errors import ConfigError
from ragmem.schema import CONTEXT_SOURCES

__all__ = ["Names", "FAMILY_NAMES", "DEFAULT_METRICS", "DEFAULT_KS", "RELEVANCE_MODES", "expand_selection",
           "VERDICTS", "RELIABILITY", "CLASSIFICATION", "COVERAGE", "LATENCY", "RANKING", "GENERATION", "RAG", "RUBRIC",
           "PER_SOURCE", "CONVERSATION", "CUSTOM",
           "RANKING_FAMILIES", "AT_K", "LATENCY_SUFFIXES", "STAGE_LATENCY", "GENERATION_COMPANIONS", "PER_SOURCE_KINDS"]

DEFAULT_KS = (1, 3, 5, 10)  # the cut-offs of ranking.k by default
RELEVANCE_MODES = ("auto", "ids", "keyword")


@dataclass(frozen=True)
class Names:
    """The names of one family.

    - ``selectable``: names a user may put in ``metrics``; ``pattern``: more of them by shape
      (``ndcg_at_7``); ``selectors``: selector name -> the names it stands for, given ``ranking.k``
      (``ndcg_at_k``, ``per_source``);
    - ``owns(name)``: whether an output name is the family's, its companions (confusion counts,
      per-stage latencies) included.
    """

    family: str
    selectable: tuple[str, ...]
    pattern: Pattern[str] | None = None
    selectors: dict[str, Callable[[Sequence[int]], list[str]]] = field(default_factory=dict)
    owns_also: Callable[[str], bool] | None = None

    def selects(self, name: str) -> bool:
        return name in self.selectable or (self.pattern is not None and self.pattern.match(name) is not None)

    def owns(self, name: str) -> bool:
        return self.selects(name) or (self.owns_also is not None and self.owns_also(name))

    def expand(self, name: str, ks: Sequence[int]) -> list[str] | None:
        """The output names a selected name stands for, or ``None`` when it is not this family's."""
        if name in self.selectors:
            return self.selectors[name](ks)
        return [name] if self.selects(name) else None


VERDICTS = Names("verdicts", ("pass_rate",))

CLASSIFICATION = Names("classification", ("accuracy", "precision", "recall", "f1"))

#: The judge's own reliability (:mod:`ragmem.metrics.reliability`): computed on every run, selected
#: or not (like pass_rate), each where its inputs exist (labels, repeated samples, the keyword judge).
RELIABILITY = Names("reliability", (
    "judge_label_kappa", "judge_label_agreement", "judge_sensitivity", "judge_specificity",
    "pass_rate_ppi", "answer_correctness_ppi",
    "judge_self_agreement", "judge_flip_rate", "judge_fleiss_kappa",
    "judge_threshold_low_pass_rate", "judge_threshold_high_pass_rate",
), owns_also=("n_labelled", "n_judge_undecided").__contains__)

COVERAGE = Names("coverage", ("avg_coverage", "reference_coverage"))

#: whole-call latency name -> its statistic; a stage's are ``{stage}_latency_{statistic}``
LATENCY_SUFFIXES = {"avg_latency": "avg", "latency_p50": "p50", "latency_p95": "p95",
                    "latency_p99": "p99", "latency_max": "max"}
STAGE_LATENCY = re.compile(r"^(\w+)_latency_(avg|p50|p95|p99|max)$")
LATENCY = Names("latency", tuple(LATENCY_SUFFIXES), owns_also=lambda name: STAGE_LATENCY.match(name) is not None)

RANKING_FAMILIES = ("hit_rate", "mrr", "ndcg", "recall", "precision", "map")
AT_K = re.compile(r"^(%s)_at_(\d+)$" % "|".join(RANKING_FAMILIES))
RANKING = Names("ranking", (), pattern=AT_K,
                selectors={f"{family}_at_k": (lambda ks, f=family: [f"{f}_at_{k}" for k in ks])
                           for family in RANKING_FAMILIES})

GENERATION_COMPANIONS = ("bleu_sentence_mean", "chrf_sentence_mean")
GENERATION = Names("generation", ("bleu", "bleu_1", "chrf", "rouge_1", "rouge_2", "rouge_l", "token_f1", "exact_match"),
                   owns_also=GENERATION_COMPANIONS.__contains__)

RAG = Names("rag", ("answer_correctness", "contextual_precision", "context_relevance", "answer_relevancy",
                    "context_entity_recall", "faithfulness"))

PER_SOURCE_KINDS = ("context_share", "coverage", "reference_coverage", "hit_rate", "answer_source_share")
_PER_SOURCE = tuple(f"{kind}_{source}" for source in CONTEXT_SOURCES for kind in PER_SOURCE_KINDS)
PER_SOURCE = Names("per_source", _PER_SOURCE, selectors={"per_source": lambda ks: list(_PER_SOURCE)})

#: the config's rubrics (``rubrics:``): ``rubric_<name>`` each, with ``rubric_<name>_failures``
RUBRIC_SUFFIXES = ("_failures", "_reason", "_error")  # (a rubric's name may not end with one)
RUBRIC = Names("rubric", (), pattern=re.compile(r"^rubric_[a-z][a-z0-9_]*$"),
               owns_also=lambda name: name.startswith("rubric_") and name.endswith("_failures"))

#: A conversation's turns (:mod:`ragmem.metrics.conversation`): on examples that hold their earlier turns
#: (``history``); not in the default selection, which a dataset with conversations gets them added to
CONVERSATION = Names("conversation", ("knowledge_retention", "earlier_turn_recall"),
                     owns_also=("knowledge_retention_failures", "earlier_turn_recall_failures").__contains__)

#: Metrics of one's own (``metrics.custom``, :mod:`ragmem.metrics.custom`): named by the config, so no
#: name is the family's by its shape; each is computed whether ``metrics`` names it or not.
CUSTOM = Names("custom", ())
_CUSTOM_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
#: output names a metric of one's own may not take: those of ragmem's figures and of the results table's columns
_RESERVED_PREFIXES = ("n_", "undefined_", "judge_", "rubric_", "stage_", "tokens_", "ci_")
_RESERVED_SUFFIXES = ("_failures", "_error", "_reason", "_errors", "_calls", "_cache_hits", "_tokens_in",
                      "_tokens_out", "_ci_low", "_ci_high", "_pass_rate")
_TABLE_COLUMNS = ("id", "query", "generated_answer", "reference_answer", "label", "contexts", "n_contexts",
                  "gold_relevance", "kw_reference", "kw_generated", "overlap", "verdict", "keyword_verdict",
                  "latency_s", "attempts", "error", "source_file", "record", "history", "trace_id", "session_id",
                  "user_id", "cluster", "per_source")


def check_custom_name(name: str) -> str | None:
    """Why ``name`` cannot be a metric of one's own (``metrics.custom``), or ``None`` when it can.

    >>> check_custom_name("order_id_format") is None, check_custom_name("f1")
    (True, 'f1 is a metric of ragmem (choose another name)')
    """
    if not isinstance(name, str) or not _CUSTOM_NAME.match(name):
        return f"expected lower-case letters, digits and _ (a letter first, at most 64), got {name!r}"
    if any(family.owns(name) or name in family.selectors for family in FAMILY_NAMES):
        return f"{name} is a metric of ragmem (choose another name)"
    if name.startswith(_RESERVED_PREFIXES) or name.endswith(_RESERVED_SUFFIXES) or name in _TABLE_COLUMNS:
        return f"{name} is a name ragmem keeps for its own figures and columns (choose another name)"
    return None

#: Every family's names, in the order their metrics are computed and reported.
FAMILY_NAMES: tuple[Names, ...] = (VERDICTS, RELIABILITY, CLASSIFICATION, COVERAGE, LATENCY, RANKING, GENERATION, RAG,
                                   RUBRIC, PER_SOURCE, CONVERSATION, CUSTOM)

#: The default selection: every metric (ranking families at every k of ``ranking.k``, per-source) but a
#: conversation's (added where the data has conversations: :func:`ragmem.run.prepare.conversation_defaults`).
DEFAULT_METRICS: tuple[str, ...] = (
    *(n for f in FAMILY_NAMES if f not in (PER_SOURCE, CONVERSATION) for n in f.selectable),
    *(s for f in FAMILY_NAMES for s in f.selectors),
)


def expand_selection(names: Sequence[str], ks: Sequence[int] = DEFAULT_KS) -> list[str]:
    """Selector names -> output names; unknown names are a ConfigError listing what exists.

    >>> expand_selection(["f1", "ndcg_at_k", "mrr_at_7", "f1"], ks=(1, 5))
    ['f1', 'ndcg_at_1', 'ndcg_at_5', 'mrr_at_7']
    """
    out: list[str] = []
    unknown = []
    for name in names:
        expanded = next((e for f in FAMILY_NAMES if (e := f.expand(name, ks)) is not None), None)
        if expanded is None:
            unknown.append(name)
        else:
            out.extend(expanded)
    if unknown:
        raise ConfigError(f"metrics: unknown metric(s) {', '.join(map(repr, unknown))}; available: "
                          f"{', '.join(DEFAULT_METRICS)} (or e.g. ndcg_at_10, coverage_memory_long)")
    return list(dict.fromkeys(out))



#: the endings of an output name that counts things (an endpoint's usage included)
COUNT_SUFFIXES = ("_errors", "_failures", "_calls", "_cache_hits", "_tokens_in", "_tokens_out")


def is_count(name: str) -> bool:
    """Whether an output name is a count (printed as an integer, never ``147.0000``).

    >>> [is_count(n) for n in ("judge_calls", "n_labelled", "undefined_f1", "pass_rate", "judge_cost_usd")]
    [True, True, True, False, False]
    """
    return name.startswith(("n_", "undefined_", "confusion_")) or name.endswith(COUNT_SUFFIXES)
