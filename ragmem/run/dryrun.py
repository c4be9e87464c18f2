"""``ragmem run CONFIG --dry-run``: what a run would ask of its LLM and embedding endpoints, what
share of it the cache already holds, and what it would cost, without asking.

The dry run goes through the run's own code: the configuration and the data are validated, the
endpoints probed (preflight), and the LLM judge and the RAG metrics are computed with recording
clients in place of the real ones. A recording client builds every request exactly as the real
client would (same messages, same cache key), looks it up in the judge cache, and answers it from
the cache or with a stand-in reply; nothing is sent. So the counts per metric are those of the run,
including the requests that depend on earlier replies (faithfulness judges each claim the answer was
broken into: for a cached claims reply the real claims are used, otherwise the answer's sentences).

Answers: recorded in the data (replay), journaled by the run given with ``--resume``, or, for a live
agent (never called in a dry run), stand-ins: the reference answer as the answer and the recorded
contexts, else ``retriever.top_k`` contexts of ``corpus.chunk_size`` characters. Counts that depend on
stand-ins are marked estimated, and their cached share is a lower bound.

Tokens are estimated, not counted (no endpoint's tokenizer is called): one token per CJK character
plus one per four other characters (:func:`ragmem.prompts.templates.estimate_tokens`), for the prompt as sent and for a
reply of the expected shape. Repairs and retries are not counted: at most one repair per item.
The cost uses ``judge.prices`` for the judge and embeddings models; the bound assumes every reply
runs to its limit (:meth:`ragmem.clients.llm_client.JudgeClient.reply_limit`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ragmem.agents.replay import ReplayAgent
from ragmem.clients import endpoints
from ragmem.clients.llm_client import EmbeddingClient, Result
from ragmem.config.loading import RunConfig
from ragmem.data.loaders import Dataset
from ragmem.judges import build_judge, judging
from ragmem.metrics import MetricContext, relevancy
from ragmem.metrics.rag import _sentences, NAMES, OfflineEntities, RagMetrics
from ragmem.metrics.rubric import groups as rubric_groups, score_rubrics
from ragmem.prompts.rubrics import stand_in as rubric_stand_in
from ragmem.prompts.templates import estimate_tokens
from ragmem.run import environment, pipeline
from ragmem.run.journal import Journal
from ragmem.run.summary import write_json
from ragmem.schema import AgentOutput, Context
from ragmem.text import plural

_REASON = "x" * 120  # a verdict's reason: about 30 tokens, the length judges typically give


@dataclass
class Line:
    """The requests one metric makes of one endpoint."""

    metric: str
    endpoint: str           # judge | embeddings
    requests: int = 0
    cached: int = 0
    tokens_in: int = 0      # estimated, uncached requests only
    tokens_out: int = 0
    tokens_out_max: int = 0  # the replies' limits (max_tokens) summed
    estimated: bool = False  # built from stand-in answers or contexts
    cost_usd: float | None = None
    cost_max_usd: float | None = None


@dataclass
class DryRun:
    config: str
    examples: int
    answers: str                     # where the answers the requests are built from come from
    preflight: str
    lines: list[Line] = field(default_factory=list)
    agent_calls: int = 0             # calls a live agent would get (not made)
    notes: list[str] = field(default_factory=list)

    def total(self) -> Line:
        out = Line("total", "all")
        for line in self.lines:
            out.requests += line.requests
            out.cached += line.cached
            out.tokens_in += line.tokens_in
            out.tokens_out += line.tokens_out
            out.tokens_out_max += line.tokens_out_max
            out.estimated |= line.estimated
        # the lines with a price (a model without one is named in the notes)
        costs = [line.cost_usd for line in self.lines if line.cost_usd is not None]
        out.cost_usd = sum(costs) if costs else None
        bounds = [line.cost_max_usd for line in self.lines if line.cost_max_usd is not None]
        out.cost_max_usd = sum(bounds) if bounds else None
        return out

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["total"] = asdict(self.total())
        return out


class _Tally:
    def __init__(self):
        self.current = "answer_correctness"
        self.estimated = False
        self.lines: dict[tuple[str, str], Line] = {}

    def line(self, endpoint: str) -> Line:
        key = (self.current, endpoint)
        if key not in self.lines:
            self.lines[key] = Line(self.current, endpoint, estimated=self.estimated)
        return self.lines[key]


def _stand_in(task: str, fields: dict[str, str]) -> dict[str, Any]:
    """A reply of the contract's shape, sized like a real one, for a request the cache does not hold."""
    if task in ("claims", "statements"):
        return {task: _sentences(fields.get("answer", "")) or [fields.get("answer", "")]}
    if task == "question":
        return {"question": f"{fields.get('answer', '')[:80]}? ({fields.get('variant', '')})", "noncommittal": 0}
    if task == "entities":
        return {"entities": sorted(OfflineEntities(frozenset())(fields.get("text", "")))}
    return {"verdict": "yes", "reason": _REASON}


class _JudgeRecorder:
    """In place of :class:`ragmem.clients.llm_client.JudgeClient`: records each request, sends none."""

    def __init__(self, client, tally: _Tally):
        self.client, self.tally = client, tally

    def run(self, requests):
        """One Result per request; a verdict's (or a rubric's) ``judge.samples`` requests are each counted."""
        return [self.client.combine(task, [self._one(task, fields, k) for k in range(self.client.samples_of(task))])
                for task, fields in requests]

    def _one(self, task: str, fields: dict[str, str], sample: int) -> Result:
        messages, key = self.client.request(task, fields, sample)
        line = self.tally.line("judge")
        line.requests += 1
        cached = self.client.cache.get(key) if self.client.cache is not None else None
        if cached is not None:
            line.cached += 1
            return Result(cached)
        rubrics = self.client.rubrics_of(task)
        reply = rubric_stand_in(rubrics) if rubrics else _stand_in(task, fields)
        line.tokens_in += sum(estimate_tokens(m["content"]) for m in messages) + 4 * len(messages)
        line.tokens_out += estimate_tokens(json.dumps(reply, ensure_ascii=False))
        line.tokens_out_max += self.client.reply_limit(task, fields)
        return Result(reply)

    def signature(self) -> str:
        return self.client.signature()


class _EmbeddingRecorder:
    """In place of :class:`ragmem.clients.llm_client.EmbeddingClient`: one request per distinct text, none sent."""

    def __init__(self, client, tally: _Tally):
        self.client, self.tally = client, tally

    def embed(self, texts):
        line = self.tally.line("embeddings")
        for text in dict.fromkeys(texts):
            line.requests += 1
            if self.client.cache is not None and self.client.text_key(text) in self.client.cache:
                line.cached += 1
            else:
                line.tokens_in += estimate_tokens(text)
        return [Result([1.0]) for _ in texts]


def _outputs(cfg: RunConfig, dataset, resume: str | None) -> tuple[list[AgentOutput], str, int]:
    """The outputs the requests are built from, where they come from, and how many are stand-ins
    (the examples a live agent would be called for)."""
    if cfg.agent.type == "replay":
        return [ReplayAgent().replay(e) for e in dataset.examples], "recorded in the data", 0
    kept: dict[str, AgentOutput] = {}
    if resume:
        kept = {k: v for k, v in Journal(resume, resume=True).outputs().items() if v.error is None}
    out, stand_ins = [], 0
    for e in dataset.examples:
        if e.id in kept:
            out.append(kept[e.id])
            continue
        stand_ins += 1
        contexts = list(e.contexts) or [Context(f"[{e.id} context {i + 1}] " + "x" * cfg.corpus.chunk_size)
                                        for i in range(cfg.retriever.top_k)]
        out.append(AgentOutput(e.id, e.reference_answer or e.query, contexts, None))
    where = f"journaled by {resume} for {len(kept)}, " if resume else ""
    return out, f"{where}stand-ins for {stand_ins} (the agent is not called in a dry run)", stand_ins


def _price(cfg: RunConfig, line: Line) -> None:
    model = cfg.judge.model if line.endpoint == "judge" else cfg.embeddings.model
    price = cfg.judge.prices.get(model or "")
    if price is None:
        return
    line.cost_usd = price.usd(line.tokens_in, line.tokens_out)
    line.cost_max_usd = price.usd(line.tokens_in, line.tokens_out_max)


def dry_run(cfg: RunConfig, config_name: str = "", *, dataset: Dataset | None = None, resume: str | None = None,
            preflight: bool = True) -> DryRun:
    """Validate everything, probe the endpoints, and count the requests the run would make (module
    doc); ``dataset``: the run's data as :mod:`ragmem.run.prepare` loaded it (read now when not given)."""
    keywords, _, client = judging(cfg)
    embedder = None
    if relevancy.embeds(cfg):
        embedder = EmbeddingClient(cfg.embeddings)
    environment.check_components(cfg)
    dataset = dataset if dataset is not None else pipeline.load(cfg)
    if dataset.streamed:  # counted over every example: a large dataset's chunks read into one list here
        dataset = Dataset([e for chunk in dataset.chunks() for e in chunk], dataset.files, dataset.sha256)
    probed = endpoints.configured(cfg)
    if preflight:
        endpoints.preflight(probed)
        verb = "answers" if len(probed) == 1 else "answer"
        checked = f"{plural(len(probed), 'endpoint')} {verb}: {', '.join(e.setting for e in probed)}" if probed else "no endpoints"
    else:
        checked = "skipped (--no-preflight)"
    result = DryRun(config_name, len(dataset), "", checked)
    outputs, result.answers, result.agent_calls = _outputs(cfg, dataset, resume)
    if client is None:
        result.notes.append("judge.type keyword: every metric runs offline, no LLM request is made")
        return result
    tally = _Tally()
    tally.estimated = result.agent_calls > 0
    recorder = _JudgeRecorder(client, tally)
    llm_judge = build_judge(cfg.judge, keywords, cfg.zero_division, recorder)
    judgements = pipeline.judge(llm_judge, dataset.examples, outputs)
    table = pipeline.build_table(dataset.examples, outputs, judgements, keywords)
    ctx = MetricContext(keywords, cfg.zero_division, cfg.ks, cfg.ranking.relevance, cfg.ranking.keyword_threshold,
                        generation=cfg.generation, rag=cfg.rag_metrics, llm=recorder,
                        embedder=_EmbeddingRecorder(embedder, tally) if embedder is not None else None)
    computer = RagMetrics(ctx, ctx.rag)
    for name in NAMES:
        if name in cfg.metrics and name != "answer_correctness":
            tally.current = name
            getattr(computer, name)(table)
    rows = list(table.itertuples(index=False))
    for group in rubric_groups(cfg.rubric_definitions(), cfg.judge.batch_rubrics):
        tally.current = "+".join(r.metric for r in group)
        score_rubrics(rows, group, recorder, batch=len(group) > 1)
    result.lines = list(tally.lines.values())
    for line in result.lines:
        _price(cfg, line)
    unpriced = sorted({str(cfg.judge.model if line.endpoint == "judge" else cfg.embeddings.model)
                       for line in result.lines if line.cost_usd is None})
    if unpriced:
        result.notes.append(f"no price in judge.prices for {', '.join(unpriced)}: not in the cost")
    return result


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.4f}"


def render(plan: DryRun) -> list[str]:
    """The dry run as lines of text (the CLI prints them)."""
    lines = [f"dry run of {plan.config}: {plan.examples} examples; nothing was sent to any endpoint",
             f"answers: {plan.answers}", f"preflight: {plan.preflight}"]
    if plan.agent_calls:
        lines.append(f"agent: {plan.agent_calls} calls in the run (not made in a dry run)")
    if plan.lines:
        width = max(24, 2 + max(len(line.metric) for line in plan.lines))  # (a batch of rubrics: a long name)
        header = f"{'metric':<{width}}{'endpoint':<12}{'requests':>9}{'cached':>14}{'tokens in':>11}{'tokens out':>11}{'cost':>11}"
        lines += ["", header, "-" * len(header)]
        for line in [*plan.lines, plan.total()]:
            share = f"{line.cached} ({line.cached / line.requests:.0%})" if line.requests else "0"
            mark = "~" if line.estimated else " "
            lines.append(f"{line.metric:<{width}}{line.endpoint:<12}{line.requests:>8}{mark}{share:>14}"
                         f"{line.tokens_in:>11,}{line.tokens_out:>11,}{_money(line.cost_usd):>11}")
        total = plan.total()
        lines += ["", "tokens and cost: estimates for the uncached requests (1 token per CJK character, 1 per 4 other",
                  "characters); repairs and retries not counted (at most one repair per item)"]
        if total.cost_max_usd is not None:
            lines.append(f"at most {_money(total.cost_max_usd)} if every reply ran to its limit "
                         f"({total.tokens_out_max:,} tokens out; see judge.max_tokens)")
        if total.estimated:
            lines.append("~ built from stand-in answers or contexts: the request count is an estimate and the "
                         "cached share a lower bound")
    lines += plan.notes
    return lines


def write(plan: DryRun, path: Path) -> None:
    write_json(path, plan.as_dict())
