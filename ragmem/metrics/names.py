"""The metric catalogue's declarations: which metric names exist, each with its facts (its family,
the fields it needs, which way is better, its unit, whether it is a headline figure, whether it is
scored per example and written back onto traces), the shapes and selectors that stand for more
of them, the default selection and how a selection expands.

A leaf without pandas or numpy: the settings schema (:mod:`ragmem.config.settings`) validates ``metrics``
with it, each family module (:mod:`ragmem.metrics.ranking`, ...) takes its names from here, and
every view of the metrics (the terminal table, the report, MLflow's keys, ``compare``, the gates,
the window comparison, the trace assessments) reads their facts through
:mod:`ragmem.metrics.catalogue`, so a metric is declared once. Adding one: its :class:`Metric` in its
family's :class:`Names` here, its computation in the family module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Pattern, Sequence

from ragmem.errors import ConfigError
from ragmem.schema import CONTEXT_SOURCES

__all__ = ["Metric", "Names", "FAMILY_NAMES", "KNOWN", "HIGHER", "LOWER", "SYSTEM", "JUDGE", "REFERENCE", "CONTEXTS",
           "GOLD_OR_REFERENCE", "HISTORY", "USAGE", "MEMORY_BENCH", "OWN", "DEFAULT_METRICS", "DEFAULT_KS", "RELEVANCE_MODES", "expand_selection",
           "VERDICTS", "RELIABILITY", "CLASSIFICATION", "COVERAGE", "LATENCY", "RANKING", "GENERATION", "RAG", "RUBRIC",
           "PER_SOURCE", "CONVERSATION", "CUSTOM",
           "RANKING_FAMILIES", "AT_K", "LATENCY_SUFFIXES", "STAGE_LATENCY", "GENERATION_COMPANIONS", "PER_SOURCE_KINDS"]

DEFAULT_KS = (1, 3, 5, 10)  # the cut-offs of ranking.k by default
RELEVANCE_MODES = ("auto", "ids", "keyword")

#: which way is better (``None``: neither, a count or a diagnostic)
HIGHER, LOWER = "higher", "lower"
#: the fields a metric may need beyond the query and the answer (:mod:`ragmem.metrics.needs`)
REFERENCE = "reference_answer"
CONTEXTS = "contexts"
GOLD_OR_REFERENCE = "gold_or_reference"  # what a context's relevance is judged by: gold ids, else the reference
HISTORY = "history"  # the earlier turns of the conversation an example is a turn of
#: where a figure is shown: among the system's metrics, or under "judge reliability" (it measures the judge)
SYSTEM, JUDGE = "system", "judge"


@dataclass(frozen=True)
class Metric:
    """The facts of one output name, declared once (read through :mod:`ragmem.metrics.catalogue`).

    - ``direction``: :data:`HIGHER` or :data:`LOWER` is better, ``None`` for neither (counts, diagnostics);
    - ``needs``: the fields of an example it needs beyond query and answer (:mod:`ragmem.metrics.needs`);
    - ``unit``: ``score`` (a mean of per-example values, mostly in [0, 1]), ``seconds``, ``count``,
      ``tokens``, ``usd``, ``share`` (a share or rate that is no quality), ``agreement`` (kappa: [-1, 1]);
    - ``headline``: shown in the terminal table and the report's headline by default (every figure is
      in the summary JSON and MLflow); ``section``: :data:`SYSTEM` or :data:`JUDGE`;
    - ``column``: its per-example column when scored per example (shown on the report's examples and
      written back onto traces as an assessment), ``None`` when it is a figure of the whole run;
      ``corpus``: its value is a figure of the whole corpus although it has a per-example column
      (sacrebleu's BLEU and chrF: not the mean of the sentences' scores);
    - ``watched``: compared window to window (``data.traces.incremental``, where the run has it);
      ``listed``: a column of ``ragmem compare``'s runs table.
    """

    name: str
    direction: str | None = HIGHER
    needs: tuple[str, ...] = ()
    unit: str = "score"
    headline: bool = True
    section: str = SYSTEM
    column: str | None = None
    corpus: bool = False
    watched: bool = False
    listed: bool = False

    def but(self, **changes: Any) -> "Metric":
        return replace(self, **changes)


def _score(name: str, needs: tuple[str, ...] = (), **facts: Any) -> Metric:
    """A score scored per example: its column is its name."""
    return Metric(name, needs=needs, column=name, **facts)


def _count(name: str, **facts: Any) -> Metric:
    return Metric(name, **{"direction": None, "unit": "count", "headline": False, **facts})


@dataclass(frozen=True)
class Names:
    """The names of one family, each with its facts.

    - ``metrics``: the names a user may put in ``metrics``, with their facts; ``pattern``: more of them
      by shape (``ndcg_at_7``); ``selectors``: selector name -> the names it stands for, given
      ``ranking.k`` (``ndcg_at_k``, ``per_source``);
    - ``companions``: output names the family also gives (confusion counts), with their facts;
    - ``shaped``: the facts of a name the family owns by its shape (``ndcg_at_7``,
      ``retrieve_latency_p95``), or ``None``;
    - ``owns(name)``: whether an output name is the family's, its companions included.
    """

    family: str
    metrics: tuple[Metric, ...]
    pattern: Pattern[str] | None = None
    selectors: dict[str, Callable[[Sequence[int]], list[str]]] = field(default_factory=dict)
    companions: tuple[Metric, ...] = ()
    shaped: Callable[[str], Metric | None] | None = None

    @property
    def selectable(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.metrics)

    def selects(self, name: str) -> bool:
        return name in self.selectable or (self.pattern is not None and self.pattern.match(name) is not None)

    def facts(self, name: str) -> Metric | None:
        """The facts of ``name`` when it is the family's (a selectable name, a companion, a shape)."""
        found = next((m for m in (*self.metrics, *self.companions) if m.name == name), None)
        return found if found is not None or self.shaped is None else self.shaped(name)

    def owns(self, name: str) -> bool:
        return self.facts(name) is not None or self.selects(name)

    def expand(self, name: str, ks: Sequence[int]) -> list[str] | None:
        """The output names a selected name stands for, or ``None`` when it is not this family's."""
        if name in self.selectors:
            return self.selectors[name](ks)
        return [name] if self.selects(name) else None


VERDICTS = Names("verdicts", (Metric("pass_rate", column="verdict", watched=True, listed=True),),
                 companions=(_count("n_judged"),))

CLASSIFICATION = Names("classification", (
    Metric("accuracy", headline=False, section=JUDGE),  # (judge_label_agreement again: shown with --all)
    Metric("precision", section=JUDGE),
    Metric("recall", headline=False, section=JUDGE),  # (judge_sensitivity again)
    Metric("f1", section=JUDGE),
), companions=tuple(_count(n) for n in ("confusion_tp", "confusion_fn", "confusion_fp", "confusion_tn", "n_classified")))

#: The judge's own reliability (:mod:`ragmem.metrics.reliability`): computed on every run, selected
#: or not (like pass_rate), each where its inputs exist (labels, repeated samples, the keyword judge).
_JUDGE = Metric("", section=JUDGE)
RELIABILITY = Names("reliability", (
    _JUDGE.but(name="judge_label_kappa", unit="agreement"), _JUDGE.but(name="judge_label_agreement"),
    _JUDGE.but(name="judge_sensitivity"), _JUDGE.but(name="judge_specificity"),
    Metric("pass_rate_ppi"), Metric("answer_correctness_ppi"),  # the system as a human would judge it: below pass_rate
    _JUDGE.but(name="judge_self_agreement"), _JUDGE.but(name="judge_flip_rate", direction=LOWER),
    _JUDGE.but(name="judge_fleiss_kappa", unit="agreement"),
    _JUDGE.but(name="judge_threshold_low_pass_rate", direction=None, unit="share"),  # (what the verdicts would be
    _JUDGE.but(name="judge_threshold_high_pass_rate", direction=None, unit="share"),  # at another threshold)
), companions=(_count("n_labelled", headline=True, section=JUDGE),
               _count("n_judge_undecided", headline=True, section=JUDGE)))

COVERAGE = Names("coverage", (
    Metric("avg_coverage", needs=(CONTEXTS,), column="coverage", watched=True),
    _score("reference_coverage", (REFERENCE, CONTEXTS), listed=True),
))

#: whole-call latency name -> its statistic; a stage's are ``{stage}_latency_{statistic}``
LATENCY_SUFFIXES = {"avg_latency": "avg", "latency_p50": "p50", "latency_p95": "p95",
                    "latency_p99": "p99", "latency_max": "max"}
STAGE_LATENCY = re.compile(r"^(\w+)_latency_(avg|p50|p95|p99|max)$")
_SECONDS = Metric("", direction=LOWER, unit="seconds")
LATENCY = Names(
    "latency", tuple(_SECONDS.but(name=n, watched=n in ("avg_latency", "latency_p95"), listed=n == "latency_p95")
                     for n in LATENCY_SUFFIXES),
    companions=(_count("n_latency_measured"),),
    # a stage's: its p95 shown, the others in the JSON (--all)
    shaped=lambda name: _SECONDS.but(name=name, headline=m.group(2) == "p95")
    if (m := STAGE_LATENCY.match(name)) else None)

RANKING_FAMILIES = ("hit_rate", "mrr", "ndcg", "recall", "precision", "map")
AT_K = re.compile(r"^(%s)_at_(\d+)$" % "|".join(RANKING_FAMILIES))
#: the ranking families scored per example on the report's examples and the traces (at the largest k)
_RANKING_PER_EXAMPLE = ("hit_rate", "ndcg", "mrr")
#: a ranking name's facts; headline and per-example at the largest k only (:func:`ragmem.metrics.catalogue.at_k`)
RANKED = Metric("", needs=(GOLD_OR_REFERENCE,))


def _at_every_k(family: str) -> Callable[[Sequence[int]], list[str]]:
    return lambda ks: [f"{family}_at_{k}" for k in ks]


RANKING = Names("ranking", (), pattern=AT_K,
                selectors={f"{family}_at_k": _at_every_k(family) for family in RANKING_FAMILIES},
                companions=(_count("n_ranking_no_relevant"),),
                shaped=lambda name: RANKED.but(name=name, column=name if m.group(1) in _RANKING_PER_EXAMPLE else None,
                                               listed=m.group(1) in ("hit_rate", "ndcg") and m.group(2) == "10")
                if (m := AT_K.match(name)) else None)

GENERATION_COMPANIONS = ("bleu_sentence_mean", "chrf_sentence_mean")
GENERATION = Names("generation", (
    Metric("bleu", needs=(REFERENCE,), column="bleu", corpus=True), Metric("bleu_1", needs=(REFERENCE,)),
    _score("chrf", (REFERENCE,), corpus=True), Metric("rouge_1", needs=(REFERENCE,)), Metric("rouge_2", needs=(REFERENCE,)),
    _score("rouge_l", (REFERENCE,)), _score("token_f1", (REFERENCE,)), _score("exact_match", (REFERENCE,)),
), companions=tuple(Metric(n, needs=(REFERENCE,), headline=False) for n in GENERATION_COMPANIONS))

RAG = Names("rag", (
    _score("answer_correctness", (REFERENCE,), watched=True),
    _score("contextual_precision", (CONTEXTS, GOLD_OR_REFERENCE)),
    _score("context_relevance", (CONTEXTS,), watched=True),
    _score("answer_relevancy", watched=True),
    _score("context_entity_recall", (REFERENCE, CONTEXTS)),
    _score("faithfulness", (CONTEXTS,), watched=True),
))

PER_SOURCE_KINDS = ("context_share", "coverage", "reference_coverage", "hit_rate", "answer_source_share")
_PER_SOURCE = tuple(f"{kind}_{source}" for source in CONTEXT_SOURCES for kind in PER_SOURCE_KINDS)
_SOURCE_KIND = re.compile(r"^(%s)_(%s)$" % ("|".join(PER_SOURCE_KINDS), "|".join(CONTEXT_SOURCES)))


def _per_source(name: str) -> Metric:
    kind = _SOURCE_KIND.match(name).group(1)  # type: ignore[union-attr]
    share = kind in ("context_share", "answer_source_share")  # where contexts and answers came from: no quality
    return Metric(name, direction=None if share else HIGHER, unit="share" if share else "score",
                  headline=kind in ("context_share", "hit_rate"))  # (needs: each source's share rests on every example)


PER_SOURCE = Names("per_source", tuple(_per_source(n) for n in _PER_SOURCE),
                   selectors={"per_source": lambda ks: list(_PER_SOURCE)})

#: the config's rubrics (``rubrics:``): ``rubric_<name>`` each, with ``rubric_<name>_failures``
RUBRIC_SUFFIXES = ("_failures", "_reason", "_error")  # (a rubric's name may not end with one)
RUBRIC = Names("rubric", (), pattern=re.compile(r"^rubric_[a-z][a-z0-9_]*$"),
               shaped=lambda name: None if not name.startswith("rubric_") else _count(name)
               if name.endswith("_failures") else Metric(name))

#: A conversation's turns (:mod:`ragmem.metrics.conversation`): on examples that hold their earlier turns
#: (``history``); not in the default selection, which a dataset with conversations gets them added to
CONVERSATION = Names("conversation", (_score("knowledge_retention", (HISTORY,)),
                                      _score("earlier_turn_recall", (HISTORY,))),
                     companions=(_count("knowledge_retention_failures"), _count("earlier_turn_recall_failures")))

#: Metrics of one's own (``metrics.custom``, :mod:`ragmem.metrics.custom`): named by the config, so no
#: name is the family's by its shape; each is computed whether ``metrics`` names it or not. Their facts
#: are :data:`OWN` with the direction the config declares (``metrics.custom[].direction``).
CUSTOM = Names("custom", ())
OWN = Metric("", watched=True)
_CUSTOM_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
#: output names a metric of one's own may not take: those of ragmem's figures and of the results table's columns
_RESERVED_PREFIXES = ("n_", "undefined_", "judge_", "rubric_", "stage_", "tokens_", "ci_")
_RESERVED_SUFFIXES = ("_failures", "_error", "_reason", "_errors", "_calls", "_cache_hits", "_tokens_in",
                      "_tokens_out", "_ci_low", "_ci_high", "_pass_rate")
_TABLE_COLUMNS = ("id", "query", "generated_answer", "reference_answer", "label", "contexts", "n_contexts",
                  "gold_relevance", "kw_reference", "kw_generated", "overlap", "verdict", "keyword_verdict",
                  "latency_s", "attempts", "error", "source_file", "record", "history", "trace_id", "session_id",
                  "user_id", "cluster", "per_source")


#: What an endpoint cost (``judge_``, ``embeddings_``, ``generator_``, ``layer_``; the keyword cache's
#: hit rate): never selected, given whenever the endpoint was used
_USAGE = re.compile(r"^(judge|embeddings|generator|layer|keywords)_(calls|failures|cache_hits|cache_hit_rate|"
                    r"tokens_in|tokens_out|tokens|cost_usd)$")


def _usage(name: str) -> Metric | None:
    m = _USAGE.match(name)
    if m is None:
        return None
    endpoint, what = m.groups()
    shown = not name.startswith(("judge_cache_hit_rate", "embeddings_"))
    if what in ("tokens_in", "tokens_out", "tokens", "cost_usd"):  # what is paid: less is better
        return Metric(name, direction=LOWER, unit="usd" if what == "cost_usd" else "tokens", headline=shown)
    return Metric(name, direction=None, unit="share" if what == "cache_hit_rate" else "count", headline=shown)


USAGE = Names("usage", (), shaped=_usage)

#: The memory benchmark's figures (:mod:`ragmem.memory.benchmark`), overall and per category (``_cat{N}``)
_BENCH = re.compile(r"^(judge_score|evidence_recall|session_recall|token_f1|bleu_1|search_latency_p50|"
                    r"search_latency_p95|answer_latency_p50|answer_latency_p95|context_tokens_mean|n_questions|"
                    r"add_latency_p50|add_latency_p95|ingest_total_s)(_cat\d+)?$")


def _bench(name: str) -> Metric | None:
    m = _BENCH.match(name)
    if m is None or (m.group(1) in ("token_f1", "bleu_1") and not m.group(2)):  # (those two: generation's)
        return None
    base = m.group(1)
    if base == "n_questions":
        return _count(name)
    if "latency" in base or base == "ingest_total_s":
        return _SECONDS.but(name=name)
    if base == "context_tokens_mean":  # what each answer reads: less is cheaper
        return Metric(name, direction=LOWER, unit="tokens")
    return Metric(name)


MEMORY_BENCH = Names("memory_bench", (), shaped=_bench)

#: A pairwise comparison of two runs' answers (``ragmem compare --judge pairwise``): B's win rate over A,
#: and how often the judge changed its mind when the answers swapped places
PAIRWISE = Names("pairwise", (
    Metric("win_rate", unit="share"),
    Metric("swap_inconsistency", direction=LOWER, unit="share"),
    *(Metric(n, direction=None, unit="verdicts") for n in ("wins", "ties", "losses")),  # (its result: logged as such)
    *(_count(n) for n in ("n_shared", "n_judged", "n_failed", "n_swap_inconsistent", "n_identical", "n_asked")),
))

def check_custom_name(name: str) -> str | None:
    """Why ``name`` cannot be a metric of one's own (``metrics.custom``), or ``None`` when it can.

    >>> check_custom_name("order_id_format") is None, check_custom_name("f1")
    (True, 'f1 is a metric of ragmem (choose another name)')
    """
    if not isinstance(name, str) or not _CUSTOM_NAME.match(name):
        return f"expected lower-case letters, digits and _ (a letter first, at most 64), got {name!r}"
    if any(family.owns(name) or name in family.selectors for family in KNOWN):
        return f"{name} is a metric of ragmem (choose another name)"
    if name.startswith(_RESERVED_PREFIXES) or name.endswith(_RESERVED_SUFFIXES) or name in _TABLE_COLUMNS:
        return f"{name} is a name ragmem keeps for its own figures and columns (choose another name)"
    return None

#: Every family's names, in the order their metrics are computed and reported.
FAMILY_NAMES: tuple[Names, ...] = (VERDICTS, RELIABILITY, CLASSIFICATION, COVERAGE, LATENCY, RANKING, GENERATION, RAG,
                                   RUBRIC, PER_SOURCE, CONVERSATION, CUSTOM)

#: Every family whose names have facts: those computed, then the figures no selection names (an
#: endpoint's usage, the memory benchmark's, a pairwise comparison's)
KNOWN: tuple[Names, ...] = (*FAMILY_NAMES, USAGE, MEMORY_BENCH, PAIRWISE)

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
