"""The evaluation steps as plain functions: load, time the agent, judge, compute metrics, summarise.

Prefect tasks (``tasks/``) wrap these, the flow (``flows/evaluate.py``) chains them, and
:func:`ragmem.api.evaluate` chains them without Prefect for notebooks and pytest.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pandas as pd

from ragmem.agents import build_agent
from ragmem.agents.runner import run_live
from ragmem.clients.llm_client import EmbeddingClient
from ragmem.config.loading import RunConfig
from ragmem.data.loaders import Dataset, load_dataset
from ragmem.errors import ConfigError
from ragmem.judges import Judge, JudgeItem, Judgement, judging
from ragmem.metrics import compute_metrics, MetricContext, MetricResult, reads_context_keywords, start_metrics
from ragmem.metrics import catalogue, custom, needs, relevancy
from ragmem.metrics.generation import scorer_for
from ragmem.runtime import progress
from ragmem.schema import AgentOutput, answer_digest, Example, LABEL_SET_ASIDE, LABEL_UNBOUND
from ragmem.stats import clusters
from ragmem.stats import intervals as stats
from ragmem.text.keywords import KeywordExtractor


@dataclass
class Components:
    """What a run builds once from its config and reuses for every batch."""

    keywords: KeywordExtractor
    judge: Judge
    agent: Any
    llm: Any = None        # ragmem.clients.llm_client.JudgeClient when judge.type is llm
    embedder: Any = None   # ragmem.clients.llm_client.EmbeddingClient when embeddings.model is set
    early: Any = None      # ragmem.runtime.parallel.EarlyMaps: the metrics' maps begun batch by batch
    custom: tuple = ()     # metrics of one's own (ragmem.metrics.custom.CustomMetric), imported once

    def index_builds(self) -> int:
        """1 when building this run's reference agent built its index, 0 when it reused one."""
        return int(bool(getattr(getattr(self.agent, "instance", None), "index_built", False)))


def build_components(cfg: RunConfig) -> Components:
    keywords, judge_, llm = judging(cfg)
    embedder = None
    if relevancy.embeds(cfg):
        embedder = EmbeddingClient(cfg.embeddings)
    own = custom.load(cfg.metrics.custom, cfg.import_paths)
    return Components(keywords, judge_, build_agent(cfg), llm, embedder, custom=own)


def load(cfg: RunConfig) -> Dataset:
    """Load and validate the configured files (a live agent supplies the answers itself); refuse
    repeated judge samples in chunks (their intervals draw by position), before any call."""
    cfg.require_data()
    data = load_dataset(cfg.files, require_answer=cfg.agent.type == "replay", chunk_size=cfg.data.chunk_size)
    if data.streamed and stats.two_stage(cfg.judge.samples):  # (samples > 1 needs an LLM judge: settings)
        raise ConfigError(f"judge.samples {cfg.judge.samples}: the {len(data)} examples are more than data.chunk_size "
                          f"{cfg.data.chunk_size}, and the intervals of repeated judge samples are not computed in "
                          f"chunks; set data.chunk_size to {len(data)} or more, or judge.samples to 1")
    return data


class Batches:
    """The batches of ``items`` by ``agent.batch_size``: a fixed size, or ``auto``: ``FIRST``
    examples, then each batch sized from the last one's time (agent and judge, :meth:`took`) to take
    about ``TARGET_S``, growing at most ``GROWTH`` times per batch and up to ``MAX``; never smaller
    than ``FIRST``.

    Each batch is two Prefect task runs, and each costs the flow and the Prefect server a fixed
    ~25 ms and more (measured: 10k replayed examples in 256-example batches kept the server busy for
    3.9 s of CPU, in one batch 0.7 s). A slow agent (an LLM) keeps 256-example batches; a fast one
    (replayed data, a local function) gets a few large ones. Which examples share a batch changes
    nothing but the task names: outputs are journaled one by one and judged alike.
    """

    FIRST, TARGET_S, GROWTH, MAX = 256, 2.0, 8, 16384

    def __init__(self, items: Sequence[Any], size: int | str = "auto"):
        self.items, self.start, self.auto = items, 0, size == "auto"
        self.size = self.FIRST if self.auto else int(size)

    def __iter__(self) -> Iterator[Sequence[Any]]:
        while self.start < len(self.items):
            batch = self.items[self.start:self.start + self.size]
            self.start += len(batch)
            yield batch

    def took(self, seconds: float) -> None:
        """The last batch took ``seconds``: size the next one (``auto`` only)."""
        if self.auto:
            rate = self.size / max(seconds, 1e-3)
            self.size = int(min(self.MAX, self.size * self.GROWTH, max(self.FIRST, rate * self.TARGET_S)))


def time_agent(agent: Any, examples: Sequence[Example], cfg: RunConfig,
               on_done: Callable[[int], None] | None = None,
               on_output: Callable[[AgentOutput], None] | None = None) -> list[AgentOutput]:
    """One output per example, in order: replayed from the data or produced by timed live calls;
    each is handed to ``on_output`` (the journal) as soon as it is known."""
    if not agent.live:
        outputs = [agent.replay(e) for e in examples]
        if on_output is not None:
            for output in outputs:
                on_output(output)
        if on_done:
            on_done(len(outputs))
        return outputs
    return run_live(agent, examples, cfg.agent.concurrency, cfg.agent.timeout_s, on_done,
                    retries=cfg.agent.retries, backoff_s=cfg.agent.retry_backoff_s, on_output=on_output)


def judge(judge_: Judge, examples: Sequence[Example], outputs: Sequence[AgentOutput]) -> list[Judgement | None]:
    """Judge every answered example; ``None`` where the agent call failed (nothing to judge). An example
    without a reference answer is not asked of a judge that needs one (the keyword judge), nor of the
    LLM judge when it has no contexts either: no verdict, its reason ``no reference answer`` (not a
    failure: :mod:`ragmem.metrics.needs`)."""
    answered = [i for i, o in enumerate(outputs) if o.error is None]
    free = getattr(judge_, "reference_free", False)  # (the LLM judge: on the contexts, when there are some)
    todo = [i for i in answered if needs.has(examples[i], needs.REFERENCE) or (free and outputs[i].contexts)]
    items = [JudgeItem(examples[i].query, outputs[i].answer or "", examples[i].reference_answer or "",
                       tuple(c.text for c in outputs[i].contexts)) for i in todo]
    verdicts = judge_.judge(items) if items else []
    out: list[Judgement | None] = [None] * len(outputs)
    for i in answered:
        out[i] = Judgement(None, reason=needs.WHY[needs.REFERENCE])
    for i, verdict in zip(todo, verdicts):
        out[i] = verdict
    return out


def _keywords_text(keywords: KeywordExtractor, text: str | None) -> str:
    return " ".join(sorted(keywords(text))) if text else ""


def _votes(judgement: Judgement | None) -> dict[str, Any]:
    """judge.samples > 1: how many samples said yes (``judge_yes``) of how many valid ones
    (``judge_votes``), and the share that agree with the majority (``judge_agreement``)."""
    votes = None if judgement is None else judgement.votes
    if not votes:
        return {"judge_yes": None, "judge_votes": None, "judge_agreement": None}
    yes = sum(votes)
    return {"judge_yes": yes, "judge_votes": len(votes), "judge_agreement": max(yes, len(votes) - yes) / len(votes)}


def bound_label(example: Example, output: AgentOutput) -> tuple[int | None, int | None]:
    """``(label, set aside)``: an example's label holds for the answer it judged
    (``example.label_answer``); when the agent answered something else, the label is set aside (its
    value second, the label ``None``) and nothing compares the new answer's verdict with it. A label
    that names no answer, or an example whose call failed, keeps its label."""
    if example.label is None or example.label_answer is None or output.answer is None:
        return example.label, None
    if answer_digest(output.answer) == example.label_answer:
        return example.label, None
    return None, example.label


def build_table(examples: Sequence[Example], outputs: Sequence[AgentOutput],
                judgements: Sequence[Judgement | None], keywords: KeywordExtractor) -> pd.DataFrame:
    """The per-example results table (one row per example, input order)."""
    rows = []
    for ex, out, jd in zip(examples, outputs, judgements):
        label, aside = bound_label(ex, out)
        row = {
            "id": ex.id, "query": ex.query, "generated_answer": out.answer,
            "reference_answer": ex.reference_answer, "label": label,
            "contexts": [c.to_dict() for c in out.contexts], "n_contexts": len(out.contexts),
            "gold_relevance": ex.gold_relevance(),
            "kw_reference": _keywords_text(keywords, ex.reference_answer),
            "kw_generated": _keywords_text(keywords, out.answer),
            "overlap": None if jd is None else jd.score,
            "verdict": None if jd is None else jd.verdict,
            "judge_reason": None if jd is None else jd.reason,
            "judge_error": None if jd is None else jd.error,
            "keyword_verdict": None if jd is None else jd.keyword_verdict,
            **_votes(jd),
            "latency_s": out.latency_s, "attempts": out.attempts, "error": out.error,
            "source_file": ex.source_file, "record": ex.record,
        }
        if ex.cluster is not None:
            row[clusters.COLUMN] = ex.cluster
        if ex.history:  # a turn of a conversation: the turns before it (ragmem.metrics.conversation)
            row["history"] = ex.history
        for key in ("trace_id", "session_id", "user_id"):  # production traffic: where the example came from
            if getattr(ex, key) is not None:
                row[key] = getattr(ex, key)
        for kind, count in (ex.tokens or {}).items():
            row[f"tokens_{kind.removesuffix('_tokens')}"] = count
        if aside is not None:
            row[LABEL_SET_ASIDE] = aside
        elif label is not None and ex.label_answer is None:
            row[LABEL_UNBOUND] = True
        for stage, seconds in out.timings_s.items():
            row[f"stage_{stage}_s"] = seconds
        rows.append(row)
    table = pd.DataFrame(rows)
    if "judge_votes" in table and table["judge_votes"].isna().all():
        table = table.drop(columns=["judge_yes", "judge_votes", "judge_agreement"])
    if table["keyword_verdict"].isna().all():
        table = table.drop(columns="keyword_verdict")
    for column in ("label", LABEL_SET_ASIDE, "verdict", "keyword_verdict", "judge_yes", "judge_votes"):
        if column in table:
            table[column] = table[column].astype("Int64")
    for column in ("overlap", "latency_s"):
        table[column] = pd.to_numeric(table[column], errors="coerce").astype(float)
    for column in ("error", "judge_error", "judge_reason"):
        table[column] = table[column].astype(object).where(table[column].notna(), None)
    return table


def prime_keywords(examples: Sequence[Example], outputs: Sequence[AgentOutput], keywords: KeywordExtractor,
                   mapper=None, contexts: bool = True, counted: bool = True) -> None:
    """The keyword sets of every reference, answer and (unless not ``contexts``) context, computed at
    once on ``mapper``: each batch's references and answers before the keyword judge reads them
    (not ``counted``: primed again with the rest, :meth:`KeywordExtractor.settle`), the contexts before the metrics."""
    texts: list[str] = []
    for ex, out in zip(examples, outputs):  # a text once per example (an answer that is its reference
        # does not repeat: settle would keep it to the cache's end)
        texts += dict.fromkeys([ex.reference_answer or "", out.answer or "", *(c.text for c in out.contexts if contexts)])
    keywords.prime(texts, mapper, counted)


def primes_contexts(cfg: RunConfig, components: Components) -> bool:
    """Whether :func:`prime_keywords` computes the contexts' keyword sets too: when a family the run
    computes asks them (:func:`ragmem.metrics.reads_context_keywords`)."""
    return reads_context_keywords(selected(cfg), _metric_context(cfg, components, None))


def _metric_context(cfg: RunConfig, components: Components, mapper, early=None) -> MetricContext:
    return MetricContext(components.keywords, cfg.zero_division, cfg.ks, cfg.ranking.relevance,
                         cfg.ranking.keyword_threshold, generation=cfg.generation, rag=cfg.rag_metrics,
                         llm=components.llm, embedder=components.embedder, mapper=mapper, early=early,
                         judge=cfg.judge, confidence=cfg.stats.confidence, rubrics=cfg.rubric_definitions(),
                         custom=components.custom)


#: the columns of :func:`build_table` the families' ``start`` reads
_BatchRow = namedtuple("_BatchRow", "id query generated_answer reference_answer contexts error")


def start_scoring(examples: Sequence[Example], outputs: Sequence[AgentOutput], cfg: RunConfig,
                  components: Components) -> None:
    """Begin the metrics' text-heavy maps (generation scores, offline entities, keyword cosines)
    on one batch's answers, on the workers, which are idle while the agent and the judge run
    (``components.early``, a :class:`ragmem.runtime.parallel.EarlyMaps`; nothing without one)."""
    if components.early is None:
        return
    rows = [_BatchRow(ex.id, ex.query, out.answer, ex.reference_answer, [c.to_dict() for c in out.contexts], out.error)
            for ex, out in zip(examples, outputs)]
    start_metrics(rows, selected(cfg), _metric_context(cfg, components, components.early))


def selected(cfg: RunConfig) -> list[str]:
    """The metrics a run computes: those selected, and every gated one (an endpoint's usage, measured
    on every run, is no metric to compute)."""
    return [*cfg.metrics.names, *(g for g in cfg.gates if not catalogue.is_total(g))]


def score(table: pd.DataFrame, cfg: RunConfig, components: Components, mapper=None) -> tuple[pd.DataFrame, MetricResult]:
    """:func:`scored`, with intervals and LLM usage; text-heavy work on ``mapper`` (:mod:`ragmem.runtime.parallel`;
    default: this process), taking what :func:`start_scoring` began."""
    table, result = scored(table, cfg, components, mapper)
    components.keywords.forget()  # no metric asks for a keyword set again: let them go before the intervals' arrays
    ci, result.clusters = confidence_intervals(table, result, cfg)
    result.ci = {**ci, **result.ci}  # a family's own intervals kept (pass_rate_ppi)
    result.values.update(usage_metrics(components))
    return table, result


def scored(table: pd.DataFrame, cfg: RunConfig, components: Components, mapper=None) -> tuple[pd.DataFrame, MetricResult]:
    """The families' values and per-example columns (on a copy) of a run's or a chunk's table."""
    ctx = _metric_context(cfg, components, mapper, components.early)
    try:
        result = compute_metrics(table, selected(cfg), ctx)
    finally:
        if components.early is not None:
            components.early.clear()
    table = table.copy()
    for name, values in result.columns.items():
        table[name] = pd.Series(values, index=table.index, dtype=float if _numeric(values) else object)
    return table, result


def _numeric(values: list) -> bool:
    """Whether every value is ``None``, an int or a float (a bool is not a number here): asked of each
    value's type once, not of each value (480,000 values at 10k examples: 0.08 s, now 0.02)."""
    return all(t is type(None) or (issubclass(t, (int, float)) and not issubclass(t, bool))
               for t in {type(v) for v in values})


def run_aggregators(table: pd.DataFrame, result: MetricResult, cfg: RunConfig, names=None) -> dict:
    """Per-example statistics of ``names`` (default: all of ``result``'s): the table's and the families'."""
    scorer = scorer_for(cfg.generation.tokenizer, cfg.generation.bleu_tokenize)
    aggs = stats.aggregators(table, list(result.values) if names is None else names, cfg.zero_division, scorer)
    extra = result.statistics if names is None else {n: result.statistics[n] for n in names if n in result.statistics}
    return {**extra, **aggs}


def confidence_intervals(table: pd.DataFrame, result: MetricResult,
                         cfg: RunConfig) -> tuple[dict[str, tuple[float, float] | None], dict[str, Any] | None]:
    """Seeded bootstrap intervals (``stats.resamples``, ``stats.confidence``) of every aggregate, and
    with ``stats.cluster_by`` what the clusters did (:func:`ragmem.stats.clusters.describe`: the
    intervals resample clusters, with expanded levels, and each metric's design effect)."""
    names = [n for n, v in result.values.items() if v is not None and n not in result.ci]
    aggs = run_aggregators(table, result, cfg, names)
    if cfg.stats.cluster_by is None or cfg.stats.bootstrap != "poisson" or cfg.stats.resamples <= 0 or table.empty:
        keys = stats.example_keys(table["id"]) if cfg.stats.bootstrap == "poisson" else None
        with progress.stage("bootstrap"):
            return stats.bootstrap(aggs, len(table), cfg.stats.resamples, cfg.seed, cfg.stats.confidence, keys), None
    keys = clusters.table_keys(table)
    groups = len(np.unique(keys))
    with progress.stage("bootstrap"):
        draws = stats.resample_all(aggs, len(table), cfg.stats.resamples, cfg.seed, keys)
        alone = stats.resample_all(aggs, len(table), cfg.stats.resamples, cfg.seed, stats.example_keys(table["id"]))
    used = draws if clusters.resampled(groups) else alone  # (too few clusters: the examples, and the summary says so)
    ci = {name: stats.percentile(values, cfg.stats.confidence, clusters.resampled(groups)) for name, values in used.items()}
    effects = {name: clusters.design_effect(draws[name], alone[name]) for name in draws}
    return ci, clusters.describe(cfg.stats.cluster_by, groups, len(table), effects)


def usage_metrics(components: Components) -> dict[str, float]:
    """judge_calls, judge_failures, judge_cache_hits, judge_tokens_in/out, judge_cost_usd (and the
    same for embeddings) when an LLM was used; keywords_cache_hit_rate, the share of keyword-set
    lookups the keyword cache answered (keywords.cache_size)."""
    out: dict[str, float] = {}
    rate = components.keywords.hit_rate()
    if rate is not None:
        out["keywords_cache_hit_rate"] = rate
    if components.llm is not None:
        out.update(components.llm.usage.as_metrics("judge"))
    if components.embedder is not None:
        out.update(components.embedder.usage.as_metrics("embeddings"))
    return out
