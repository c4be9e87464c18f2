"""The memory benchmark: ingest each conversation through a memory layer, answer its questions from
what the layer recalls, and score the answers as the published LoCoMo and LongMemEval evaluations do
(the dataset's own rules: :mod:`ragmem.memory.bench_data`).

Per question: ``search`` (timed) returns memories; the generator answers from them (timed); the
answer is scored against the gold answer with ``token_f1``, ``bleu_1``, the judge (``judge_score``:
an LLM's verdict with the dataset's prompt for the question's type, or offline the keyword verdict),
``evidence_recall`` and ``session_recall`` (recall@k of the recalled memories against the evidence
turns and sessions: :func:`score`). Aggregates overall and per category (``_cat{N}``; the overall
leaves out the abstention category, which is scored as abstention and reported apart, see
:func:`judge_answers`, its F1 and BLEU-1 null): those means, ``search_latency_p50/_p95``,
``answer_latency_p50/_p95`` (search + generation), ``context_tokens_mean`` (tokens of recalled
context per query, counted with the generation tokenizer: words and CJK words, not model tokens),
``add_latency_p50/_p95`` (per ingested session), ``ingest_total_s`` and ``ingest_per_turn_s``;
``order_tau`` (BEAM's event ordering) and ``deleted_still_recalled``/``deletion_compliance`` (the
lifecycle suite) where the dataset has them; ``n_add_errors``,
``n_reset_errors``, ``n_errors``, ``n_judge_failures`` (no verdict: the judge failed, or the offline
judge cannot judge the question, a LongMemEval preference rubric) and ``n_evidence_undefined``
(questions whose recalled memories carry no ids: recall null).

The memory layers are in :mod:`ragmem.memory.layers`.
"""

from __future__ import annotations

import collections
import json
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ragmem.config.sweep_settings import MethodSpec
from ragmem.data.fields import lone_surrogate
from ragmem.errors import failure_message
from ragmem.judges import JudgeItem, judging
from ragmem.memory import beam, lifecycle
from ragmem.memory.bench_data import BenchData, DATASETS
from ragmem.memory.layers import build_layer, turn_text
from ragmem.memory.locomo import Conversation, QA, session_of
from ragmem.metrics.generation import scorer_for
from ragmem.prompts.templates import item_score, said_yes, TASKS
from ragmem.reference.generator import build_generator
from ragmem.text import plural
from ragmem.text.keywords import KeywordExtractor

LOCOMO = DATASETS["locomo"]


@dataclass
class BenchKit:
    """What every method of a benchmark shares: keywords, the generation scorer (token counts
    too), the answer generator and the judge (with its LLM client, when there is one)."""

    keywords: KeywordExtractor
    scorer: Any
    generate: Any
    judge: Any
    client: Any = None

    @classmethod
    def build(cls, cfg) -> "BenchKit":
        keywords, judge, client = judging(cfg)
        return cls(keywords, scorer_for(cfg.generation.tokenizer, cfg.generation.bleu_tokenize),
                   build_generator(cfg.generator, keywords), judge, client)

    def count_tokens(self, text: str) -> int:
        return len(self.scorer.tokens(text))

    def layer(self, spec: MethodSpec, full_context_tokens: int, folders: Sequence[str] = ()):
        return build_layer(spec, self.keywords, self.count_tokens, full_context_tokens, folders)

    def usage(self, layer=None) -> dict[str, float]:
        """Calls and tokens so far: the judge's (and its cost), the generator's when it reports them,
        and the layer's own when it has a ``usage()`` method (``{tokens_in, tokens_out, cost_usd}``
        for the LLM or embedding model inside it)."""
        out = self.client.usage.as_metrics("judge") if self.client is not None else {}
        if callable(getattr(self.generate, "usage", None)):
            out.update(self.generate.usage())
        if layer is not None and callable(getattr(layer, "usage", None)):
            out.update({f"layer_{k}": float(v) for k, v in layer.usage().items() if isinstance(v, (int, float))})
        return out

    def usage_since(self, before: dict[str, float], layer=None) -> dict[str, float]:
        """What one method used since ``before`` (the judge and the generator are shared by all)."""
        return {k: v - before.get(k, 0.0) for k, v in self.usage(layer).items() if not k.endswith("_hit_rate")}


class MethodFailed(Exception):
    """A memory layer answered no question at all: its child run ends FAILED with this reason."""


#: an abstention, offline: the answer holds one of these (lowercased). The first two are LoCoMo's
#: own test (its evaluation code); the others say the same in other words, English and Chinese
REFUSALS = ("not mentioned", "no information available", "no information", "not in the conversation",
            "does not say", "doesn't say", "do not know", "don't know", "cannot answer", "can't answer",
            "cannot be determined", "not specified", "not stated", "no record of", "no mention", "unanswerable",
            "没有提到", "未提及", "不知道", "无法回答", "没有相关信息")


def abstains(answer: str | None) -> bool:
    """Whether an answer says the information is not there (:data:`REFUSALS`).

    >>> abstains("I don't know."), abstains("That is not mentioned in our chats"), abstains("In May 2023.")
    (True, True, False)
    """
    text = (answer or "").lower().replace("\u2019", "'")
    return any(phrase in text for phrase in REFUSALS)


def judge_answers(judge, answered: Sequence["Answered"], data: BenchData = LOCOMO) -> list[float | None]:
    """The judge's verdict per answered question (None where the call or the judge failed, or where
    the offline judge cannot judge). An LLM judge asks the dataset's task for the question's category
    (:attr:`BenchData.tasks`; a LoCoMo answer: the judge's own ``answer_correctness``); offline, the
    keyword verdict as the dataset reads it (:attr:`BenchData.offline`). An abstention question is
    correct when the answer says the information is not there: offline by :func:`abstains`. A dataset
    scored by rubrics (BEAM): :func:`judge_rubrics`."""
    if data.by_rubric:
        return judge_rubrics(judge, answered)
    if data.planted:  # (the scenario's own truth: exact, whichever judge is set)
        return [None if a.error is not None else lifecycle.verdict(a.question, a.answer) for a in answered]
    todo = [i for i, a in enumerate(answered) if a.error is None]
    verdicts: list[float | None] = [None] * len(answered)

    def keyword_or_own(chosen: list[int]):  # the judge's own verdict (offline: the keyword one)
        items = [JudgeItem(answered[i].question.question, answered[i].answer or "", answered[i].question.answer)
                 for i in chosen]
        return zip(chosen, judge.judge(items) if items else [])

    client = getattr(judge, "client", None)  # an LLM judge asks its model; offline, keywords and phrases
    if client is None:
        for i, judgement in keyword_or_own([i for i in todo if not answered[i].question.abstain]):
            verdicts[i] = data.offline(answered[i].question, judgement.verdict, answered[i].answer or "")
        for i in (i for i in todo if answered[i].question.abstain):
            verdicts[i] = int(abstains(answered[i].answer))
        return verdicts
    for i, judgement in keyword_or_own([i for i in todo if answered[i].question.category not in data.tasks]):
        verdicts[i] = judgement.verdict
    asked = [i for i in todo if answered[i].question.category in data.tasks]
    requests = []
    for i in asked:
        task, qa = data.tasks[answered[i].question.category], answered[i].question
        values = {"question": qa.question, "reference": qa.answer, "answer": answered[i].answer or ""}
        requests.append((task, {f: values[f] for f in TASKS[task]["fields"]}))
    for i, reply in zip(asked, client.run(requests)):
        verdicts[i] = None if reply.error else int(said_yes(reply.value))
    return verdicts


def judge_rubrics(judge, answered: Sequence["Answered"]) -> list[float | None]:
    """Each answered question's score by its rubric (BEAM, :mod:`ragmem.memory.beam`): an LLM judge
    scores every item 0 / 0.5 / 1 (one request an item, task ``beam_rubric_item``), the question's
    score their mean (None when an item's request failed: a judge failure, counted); offline, each
    item matched by the keyword judge's overlap (:func:`ragmem.memory.beam.offline_item`), and an
    abstention question by :func:`abstains`."""
    todo = [i for i, a in enumerate(answered) if a.error is None]
    scores: list[float | None] = [None] * len(answered)
    client = getattr(judge, "client", None)
    if client is None:
        overlap = getattr(judge, "overlap", None)
        for i in todo:
            qa, answer = answered[i].question, answered[i].answer or ""
            if qa.abstain:
                scores[i] = float(abstains(answer))
                continue
            found = [overlap(beam.rubric_text(item), answer)[0] for item in qa.rubric] if overlap else []
            items = [beam.offline_item(f, judge.threshold) for f in found if f == f]  # (NaN: an item without keywords)
            scores[i] = float(np.mean(items)) if items else None
        return scores
    owners, requests = [], []
    for i in todo:
        qa = answered[i].question
        for item in qa.rubric:
            owners.append(i)
            requests.append(("beam_rubric_item", {"question": qa.question, "rubric": item,
                                                  "answer": answered[i].answer or ""}))
    given: dict[int, list[float | None]] = collections.defaultdict(list)
    for i, reply in zip(owners, client.run(requests)):
        given[i].append(None if reply.error else item_score(reply.value))
    for i in todo:
        replies = given.get(i, [])
        scores[i] = float(np.mean(replies)) if replies and None not in replies else None  # type: ignore[arg-type]  # (no None: checked)
    return scores


@dataclass
class Answered:
    conversation: str
    question: QA
    answer: str | None
    memories: list[dict[str, Any]]
    search_s: float | None
    answer_s: float | None
    error: str | None = None
    cluster: str | None = None  # the conversation's cluster (LongMemEval: its haystack); None: the conversation


@dataclass
class Ingested:
    """How ingesting one conversation went: the seconds of each ``add`` that succeeded, and the
    reason of each ``add`` (one per session) or ``reset`` that failed."""

    add_times: list[float] = field(default_factory=list)
    add_errors: list[str] = field(default_factory=list)
    reset_errors: list[str] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)  # the lifecycle suite: "update"/"delete" -> "api" or "statement"
    add_sizes: list[int] = field(default_factory=list)  # the turns of each add that succeeded (its time in add_times)


def run_conversation(layer, conversation: Conversation, qas: Sequence[QA], top_k: int,
                     generate, dataset: str = "locomo") -> tuple[list[Answered], Ingested]:
    """Reset, ingest every session in order (one ``add`` per session, timed), then answer (a
    question with a date is asked at it: the generator reads the date with the question).

    A failing ``reset`` or ``add`` is recorded (with its reason) and the conversation goes on: the
    questions are answered from what was ingested, as a deployed agent would answer after a lost
    write. A failing ``search`` or generation is recorded for that question."""
    ingested = Ingested()
    reset = getattr(layer, "reset", None)
    if callable(reset):
        try:
            reset()
        except Exception as exc:
            ingested.reset_errors.append(failure_message(exc))
    user = f"{dataset}-{conversation.id}"
    for session in conversation.sessions:
        # ``name`` is where memory libraries (mem0, OpenAI-style messages) read the speaker from
        messages = [{"role": t.speaker if t.speaker in ("user", "assistant") else "user",
                     "content": turn_text(t, session.date_time), "id": t.dia_id,
                     "timestamp": session.date_time, "speaker": t.speaker, "name": t.speaker} for t in session.turns]
        start = time.perf_counter()
        try:
            if session.operation and _through_api(layer, session, messages, user):
                ingested.paths[session.operation] = "api"
                continue
            if session.operation:  # (a layer without the call: the user's statement is all it gets)
                ingested.paths[session.operation] = "statement"
            layer.add(messages, user, session.date_time)
        except Exception as exc:
            ingested.add_errors.append(f"session {session.index}: {failure_message(exc)}")
            continue
        ingested.add_times.append(time.perf_counter() - start)
        ingested.add_sizes.append(len(messages))
    answered = []
    for qa in qas:
        start = time.perf_counter()
        try:
            memories = list(layer.search(qa.question, user, top_k))
            search_s = time.perf_counter() - start
            half = lone_surrogate(json.dumps(memories, ensure_ascii=False, default=str))
            if half is not None:  # (its answer and the run's files could not be written)
                raise ValueError(f"the layer's search reply holds a lone surrogate {half} (half of a character "
                                 f"pair: not Unicode text)")
            asked = f"(Today is {qa.date}.) {qa.question}" if qa.date else qa.question
            answer = generate(asked, [str(m.get("text", "")) for m in memories])
            answered.append(Answered(conversation.id, qa, answer, memories, search_s, time.perf_counter() - start,
                                     cluster=conversation.cluster))
        except Exception as exc:  # one failing call is recorded for that question; the run goes on
            answered.append(Answered(conversation.id, qa, None, [], None, None, failure_message(exc),
                                     cluster=conversation.cluster))
    return answered, ingested


def _through_api(layer, session, messages, user: str) -> bool:
    """A lifecycle session's update or delete through the layer's own call, when it has one: the
    memories holding the target (found by ``search``) each deleted, or rewritten to the new fact;
    False when the layer has no such call (the statement is then added as any turn)."""
    call = getattr(layer, session.operation, None)
    if not callable(call):
        return False
    target = str(session.target or "").lower()
    held = [m for m in layer.search(str(session.target), user, 50) if target in str(m.get("text", "")).lower()]
    for memory in held:  # (the layer's own id of a memory when it gives one apart from the turn's: mem0's)
        memory_id = memory.get("memory_id", memory.get("id"))
        if session.operation == "delete":
            call(memory_id, user)
        else:
            call(memory_id, messages[-1]["content"], user)
    return True


def _percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def _recall(retrieved: set[str], wanted: set[str], ok: bool) -> float | None:
    return len(retrieved & wanted) / len(wanted) if ok and wanted and retrieved else None


def score(answered: Sequence[Answered], ingested: Ingested, scorer, judge_verdicts: Sequence[float | None],
          count_tokens, data: BenchData = LOCOMO, keywords=None) -> tuple[list[dict[str, Any]], dict[str, float | None]]:
    """Per-question rows and the aggregate metrics (overall and ``_cat{N}``).

    Recall@k of the ``top_k`` recalled memories, by their ids: ``evidence_recall`` (turn level: the
    share of the question's evidence turns among them) and ``session_recall`` (the share of its
    evidence sessions that one of them comes from; a turn id's session is its part before the last
    ``:``). Both are null for a question whose recalled memories carry no ids (a layer that returned
    nothing, or facts without the turns' ids): undefined, not 0; such questions are counted in
    ``n_evidence_undefined``. A question with a reference order of events (BEAM's event ordering)
    gets ``order_tau`` too (:func:`ragmem.memory.beam.order_tau`, with ``keywords``)."""
    rows: list[dict[str, Any]] = []
    for item, verdict in zip(answered, judge_verdicts):
        qa = item.question
        retrieved = {str(m.get("id")) for m in item.memories if m.get("id") is not None}
        evidence, sessions = set(qa.evidence), qa.sessions()
        ok = item.error is None
        # an abstention has no answer to overlap with, nor has a rubric (a LongMemEval preference)
        scored = ok and not qa.abstain and qa.category not in data.rubrics
        rows.append({
            "conversation": item.conversation, "cluster": item.cluster or item.conversation, "question_id": qa.id, "question_type": qa.kind,
            "question": qa.question, "gold_answer": qa.answer, "category": qa.category, "answer": item.answer,
            "token_f1": scorer.token_f1(item.answer or "", qa.answer) if scored else None,
            "bleu_1": scorer.bleu_1(item.answer or "", qa.answer) if scored else None,
            "judge_score": None if verdict is None else float(verdict),
            "evidence_recall": _recall(retrieved, evidence, ok),
            "session_recall": _recall({session_of(r) for r in retrieved}, sessions, ok),
            "evidence_undefined": bool(ok and (evidence or sessions) and not retrieved),
            "search_latency_s": item.search_s, "answer_latency_s": item.answer_s,
            "context_tokens": sum(count_tokens(str(m.get("text", ""))) for m in item.memories) if ok else None,
            "order_tau": beam.order_tau(scorer.tokens(item.answer or ""), [set(keywords(e)) for e in qa.order])
            if ok and qa.order and keywords is not None else None,
            "still_recalled": lifecycle.still_recalled(qa, item.memories) if ok else None,
            "n_memories": len(item.memories), "retrieved_ids": sorted(retrieved), "evidence": list(qa.evidence),
            "error": item.error,
        })

    def aggregate(subset, suffix):
        def mean(key):
            values = [r[key] for r in subset if r[key] is not None]
            return float(np.mean(values)) if values else None

        search = [r["search_latency_s"] for r in subset if r["search_latency_s"] is not None]
        total = [r["answer_latency_s"] for r in subset if r["answer_latency_s"] is not None]
        return {f"token_f1{suffix}": mean("token_f1"), f"bleu_1{suffix}": mean("bleu_1"),
                f"judge_score{suffix}": mean("judge_score"), f"evidence_recall{suffix}": mean("evidence_recall"),
                f"session_recall{suffix}": mean("session_recall"),
                f"search_latency_p50{suffix}": _percentile(search, 50), f"search_latency_p95{suffix}": _percentile(search, 95),
                f"answer_latency_p50{suffix}": _percentile(total, 50), f"answer_latency_p95{suffix}": _percentile(total, 95),
                f"context_tokens_mean{suffix}": mean("context_tokens"), f"n_questions{suffix}": float(len(subset)),
                **({f"order_tau{suffix}": mean("order_tau")} if any(r["order_tau"] is not None for r in subset) else {})}

    abstention = data.abstention
    overall = rows if data.overall_abstention else [r for r in rows if r["category"] != abstention]
    metrics = aggregate(overall, "")  # LoCoMo: 1-4, the published overall; BEAM: every ability
    metrics.update(aggregate([r for r in rows if r["category"] == abstention], f"_cat{abstention}"))  # always there
    for category in sorted({r["category"] for r in rows} - {abstention}):
        metrics.update(aggregate([r for r in rows if r["category"] == category], f"_cat{category}"))
    if data.planted:  # deletion: the share of deleted facts the layer still returns (must be 0), its complement
        gone = [r["still_recalled"] for r in rows if r["still_recalled"] is not None]
        still = metrics["deleted_still_recalled"] = float(np.mean(gone)) if gone else None
        metrics["deletion_compliance"] = None if still is None else 1.0 - still
        metrics.update({f"path_{op}_api": float(way == "api") for op, way in ingested.paths.items()})
    metrics["add_latency_p50"] = _percentile(ingested.add_times, 50)
    metrics["add_latency_p95"] = _percentile(ingested.add_times, 95)
    metrics["ingest_total_s"] = float(sum(ingested.add_times)) if ingested.add_times else None
    turns = sum(ingested.add_sizes)
    metrics["ingest_per_turn_s"] = float(sum(ingested.add_times)) / turns if turns else None
    metrics["n_add_errors"] = float(len(ingested.add_errors))
    metrics["n_reset_errors"] = float(len(ingested.reset_errors))
    metrics["n_evidence_undefined"] = float(sum(r["evidence_undefined"] for r in rows))
    metrics["n_errors"] = float(sum(r["error"] is not None for r in rows))
    metrics["n_judge_failures"] = float(sum(r["judge_score"] is None and r["error"] is None for r in rows))
    return rows, metrics


def results_table(methods: dict[str, dict[str, float | None]], categories: Sequence[int],
                  data: BenchData = LOCOMO) -> list[dict[str, Any]]:
    """One row per method, shaped like the published tables: F1 / B1 / J per category and overall
    (LoCoMo: categories 1-4), the abstention category's J and question count apart, then recall,
    latency and context size."""
    table, abstention = [], data.abstention
    for method, m in methods.items():
        row: dict[str, Any] = {"method": method}
        for c in categories:
            if c == abstention:
                continue
            name = data.categories[c]
            row.update({f"{name} F1": m.get(f"token_f1_cat{c}"), f"{name} B1": m.get(f"bleu_1_cat{c}"),
                        f"{name} J": m.get(f"judge_score_cat{c}")})
        row.update({"overall F1": m.get("token_f1"), "overall B1": m.get("bleu_1"), "overall J": m.get("judge_score"),
                    # abstention: the share of its questions answered "not there", apart
                    "abstention J": m.get(f"judge_score_cat{abstention}"), "abstention n": m.get(f"n_questions_cat{abstention}"),
                    "evidence recall": m.get("evidence_recall"), "session recall": m.get("session_recall"),
                    "add p50 (s)": m.get("add_latency_p50"), "add p95 (s)": m.get("add_latency_p95"),
                    "ingest total (s)": m.get("ingest_total_s"), "ingest per turn (s)": m.get("ingest_per_turn_s"),
                    "search p50 (s)": m.get("search_latency_p50"), "search p95 (s)": m.get("search_latency_p95"),
                    "total p50 (s)": m.get("answer_latency_p50"), "total p95 (s)": m.get("answer_latency_p95"),
                    "context tokens": m.get("context_tokens_mean")})
        if "judge_calls" in m:  # an LLM judge: what this method's judging cost
            row.update({"judge tokens": (m.get("judge_tokens_in") or 0) + (m.get("judge_tokens_out") or 0),
                        "judge cost ($)": m.get("judge_cost_usd")})
        if "generator_calls" in m:  # an LLM generator: what answering cost
            row["generator tokens"] = (m.get("generator_tokens_in") or 0) + (m.get("generator_tokens_out") or 0)
        if any(k.startswith("layer_") for k in m):  # the layer's own model, as it reports it
            row.update({"layer tokens": (m.get("layer_tokens_in") or 0) + (m.get("layer_tokens_out") or 0),
                        "layer cost ($)": m.get("layer_cost_usd")})
        row.update({"add errors": m.get("n_add_errors"), "errors": m.get("n_errors"), "status": m.get("status", "FINISHED")})
        table.append(row)
    return table


FLAG = "ragmem.memory.deletion"  # the MLflow tag of a layer that still returns deleted facts


def flags(metrics: dict[str, float | None]) -> dict[str, str]:
    """What a layer's run is flagged with: deleted facts it still returns (the lifecycle suite), as the
    tag :data:`FLAG` (``failed: ...``), shown in the terminal and the summary JSON too."""
    still = metrics.get("deleted_still_recalled")
    if not still:
        return {}
    return {FLAG: f"failed: {still:.0%} of deleted facts still recalled (deletion compliance "
                  f"{1 - still:.0%}; it must be 100%)"}


def failure(answered: Sequence[Answered], ingested: Ingested) -> str | None:
    """Why a method failed as a whole (no question could be answered), or None."""
    if not answered or any(a.error is None for a in answered):
        return None
    reasons = collections.Counter(a.error for a in answered)
    reason, count = reasons.most_common(1)[0]
    lost = f"; {plural(len(ingested.add_errors), 'add')} failed too" if ingested.add_errors else ""
    return f"every one of the {len(answered)} questions failed ({count} with {reason}){lost}"
