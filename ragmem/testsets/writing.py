"""Questions written by an LLM from a team's documents, each checked before it is kept (``ragmem
generate`` without ``--offline``).

A round (at most ``generate.max_rounds``):

1. For each type still short of its quota (:func:`ragmem.testsets.plan.quotas`), the next
   ``ceil(short * generate.oversample)`` candidates of its stream (:mod:`ragmem.testsets.plan`).
2. One request each writes a question and its reference answer (:mod:`ragmem.prompts.generation`).
3. The checks of :mod:`ragmem.testsets.checks`, cheapest first: ``language``, ``standalone`` and
   ``duplicate`` (against the questions kept in earlier rounds) with no request; then ``grounded`` (the judge asked only when
   the answer's keywords are not in its contexts) and ``answerable`` (the judge answers from the
   contexts; then whether that answer matches the reference), the requests of all candidates sent
   together.
4. The survivors kept in candidate order, each checked against the questions kept before it
   (``duplicate``), up to the type's quota; survivors past it are ``surplus`` (kept out, said).

A candidate whose request failed (after retries and one repair) is ``failed``, with its reason and
chunk: a question no check could look at is not kept. Every reply is cached as it arrives (the judge
cache, or a private one when ``judge.cache`` is off): a rerun with the same seed asks nothing, and a
run stopped by Ctrl+C or a dead endpoint asks, when run again, only what was not answered.
"""

from __future__ import annotations

import collections
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ragmem.clients.endpoints import EndpointDown
from ragmem.clients.replies import kept
from ragmem.config.generate_settings import GenerateSettings
from ragmem.prompts.templates import numbered, said_yes
from ragmem.reference.corpus import Chunk
from ragmem.reference.retrievers import BM25Retriever
from ragmem.testsets import checks, plan
from ragmem.testsets.probes import distinctive, language
from ragmem.text.keywords import KeywordExtractor

#: the reference answer of an unanswerable question, in its language: what a good agent says
ABSTAIN = {"en": "The documents do not say.", "zh": "文档中没有提及。"}


@dataclass
class Written:
    """One candidate's outcome: its question and answer (once written), each check's verdict, and why
    it was not kept (``dropped``: a check's name, ``failed`` or ``surplus``) with the detail."""

    candidate: plan.Candidate
    round: int
    question: str | None = None
    answer: str | None = None
    checks: dict[str, str] = field(default_factory=dict)
    dropped: str | None = None
    detail: str | None = None
    contexts: list[Chunk] = field(default_factory=list)  # what the answerable check gave the judge

    @property
    def asked(self) -> str:
        """The question written (the checks run on written questions: a failed write is dropped first)."""
        return self.question or ""

    @property
    def said(self) -> str:
        """The answer written with the question."""
        return self.answer or ""

    def drop(self, reason: str, detail: str) -> None:
        self.dropped, self.detail = reason, detail


@dataclass
class Generated:
    """What a generation gave: the kept questions (in order), the rest with their reasons, the quotas."""

    kept: list[Written]
    dropped: list[Written]
    quotas: dict[str, int]
    rounds: int
    exhausted: set[str] = field(default_factory=set)  # types whose candidates ran out (the documents give no more)

    def counts(self) -> dict[str, int]:
        """How many were dropped for each reason (``failed`` and ``surplus`` included)."""
        return dict(collections.Counter(str(w.dropped) for w in self.dropped).most_common())

    def short(self) -> dict[str, int]:
        """The types that got fewer questions than their quota, with how many fewer."""
        got = collections.Counter(w.candidate.type for w in self.kept)
        return {t: q - got[t] for t, q in self.quotas.items() if got[t] < q}


def write_request(candidate: plan.Candidate) -> tuple[str, dict[str, str]]:
    """The request that writes ``candidate``'s question (:mod:`ragmem.prompts.generation`)."""
    first = candidate.chunks[0].text
    if candidate.type in ("single_hop", "unanswerable"):
        return f"write_{candidate.type}", {"passage": first}
    fields = {"passage_1": first, "passage_2": candidate.chunks[1].text}
    if candidate.type == "multi_hop":
        fields["link"] = ", ".join(candidate.link)
    return f"write_{candidate.type}", fields


class Writer:
    """Writes and checks questions over ``chunks`` with ``client`` (a
    :class:`ragmem.clients.llm_client.JudgeClient`); ``say`` prints a line of progress."""

    def __init__(self, client: Any, chunks: Sequence[Chunk], keywords: KeywordExtractor,
                 settings: GenerateSettings, seed: int, say: Callable[[str], None] = lambda line: None,
                 terms: Sequence[Sequence[str]] | None = None):
        self.client, self.chunks, self.keywords, self.settings, self.say = client, chunks, keywords, settings, say
        self.enabled = set(settings.checks)
        self.terms = distinctive(chunks, keywords) if terms is None else terms
        self.seed = seed
        self._retriever: BM25Retriever | None = None

    def candidates(self, quotas: dict[str, int]) -> dict[str, Any]:
        """Each type's stream of candidates (:func:`ragmem.testsets.plan.streams`)."""
        return plan.streams(self.chunks, self.terms, [t for t, q in quotas.items() if q], self.seed)

    def first_round(self, quotas: dict[str, int]) -> list[plan.Candidate]:
        """The candidates of the first round (what ``--dry-run`` counts)."""
        streams = self.candidates(quotas)
        return [c for t, q in quotas.items() if q for c in itertools.islice(streams[t], math.ceil(q * self.settings.oversample))]

    def run(self, quotas: dict[str, int]) -> Generated:
        streams = self.candidates(quotas)
        kept: list[Written] = []
        dropped: list[Written] = []
        duplicates = checks.Duplicates(self.keywords, self.settings.duplicate_threshold)
        exhausted: set[str] = set()
        rounds = 0
        while rounds < self.settings.max_rounds:
            got = collections.Counter(w.candidate.type for w in kept)
            batch = []
            for kind, quota in quotas.items():
                wanted = math.ceil((quota - got[kind]) * self.settings.oversample) if quota > got[kind] else 0
                taken = list(itertools.islice(streams[kind], wanted)) if wanted else []  # (a quota of 0 has no stream)
                if len(taken) < wanted:
                    exhausted.add(kind)
                batch += [Written(c, rounds + 1) for c in taken]
            if not batch:  # every quota met, or the documents give no more candidates
                break
            rounds += 1
            self.say(f"round {rounds}: writing {len(batch)} candidate questions ("
                     + ", ".join(f"{n} {t}" for t, n in collections.Counter(w.candidate.type for w in batch).items()) + ")")
            self._write(batch)
            self._offline(batch, duplicates)
            self._judged(batch)
            for written in batch:
                if written.dropped is None:
                    self._keep(written, kept, quotas, duplicates)
                if written.dropped:
                    dropped.append(written)
        return Generated(kept, dropped, dict(quotas), rounds, exhausted)

    def _keep(self, written: Written, kept: list[Written], quotas: dict[str, int], duplicates: checks.Duplicates) -> None:
        if self._duplicate(written, duplicates):
            return
        if "duplicate" in self.enabled:
            written.checks["duplicate"] = "pass"
        if sum(w.candidate.type == written.candidate.type for w in kept) >= quotas[written.candidate.type]:
            written.drop("surplus", f"{written.candidate.type}: its quota of {quotas[written.candidate.type]} was met")
            return
        duplicates.keep(written.asked)
        kept.append(written)

    def _ask(self, requests: list[tuple[str, dict[str, str]]]) -> list[Any]:
        try:
            return self.client.run(requests)
        except (KeyboardInterrupt, EndpointDown) as stopped:  # what was answered is cached: said, and how to go on
            stopped.ragmem_progress = ("", kept(self.client, requests), len(requests),  # type: ignore[union-attr]
                                       "requests of this step answered and kept (every earlier reply is kept too)")
            raise

    def _write(self, batch: list[Written]) -> None:
        for written, reply in zip(batch, self._ask([write_request(w.candidate) for w in batch])):
            if reply.error:
                written.drop("failed", f"writing the question: {reply.error}")
            else:
                written.question = " ".join(reply.value["question"].split())
                written.answer = " ".join(reply.value["answer"].split())

    def _offline(self, batch: list[Written], duplicates: checks.Duplicates) -> None:
        for written in batch:
            if written.dropped:
                continue
            passage = written.candidate.chunks[0].text
            if "language" in self.enabled:
                if not checks.same_language(written.asked, passage):
                    written.drop("language", f"the question is in {language(written.asked)}, its passage in "
                                             f"{language(passage)}")
                    continue
                written.checks["language"] = "pass"
            if "standalone" in self.enabled:
                words = checks.pointing(written.asked)
                if words:
                    written.drop("standalone", f"the question points at the text it was written from ({words!r})")
                    continue
                written.checks["standalone"] = "pass"
            self._duplicate(written, duplicates)

    def _duplicate(self, written: Written, duplicates: checks.Duplicates) -> bool:
        """Drops ``written`` when it near-duplicates a kept question (and the check is on); whether it did."""
        same = duplicates.of(written.asked) if "duplicate" in self.enabled else None
        if same is not None:
            written.drop("duplicate", f"{same[1]:.2f} token overlap with a kept question: {same[0]}")
        return same is not None

    def _judged(self, batch: list[Written]) -> None:
        """The grounded and answerable checks: their requests sent together, then the matches."""
        alive = [w for w in batch if not w.dropped]
        requests: list[tuple[str, dict[str, str]]] = []
        asked: list[tuple[Written, str]] = []
        for written in alive:
            written.contexts = self._contexts(written)
            text = numbered(c.text for c in written.contexts)
            if written.candidate.type != "unanswerable" and "grounded" in self.enabled:
                share = checks.grounded_share(written.said, [c.text for c in written.candidate.chunks], self.keywords)
                if share is not None and share >= self.settings.grounded_share:
                    written.checks["grounded"] = f"pass: {share:.0%} of the answer's keywords are in its contexts"
                else:
                    requests.append(("claim_support", {"contexts": text, "claim": _claim(written)}))
                    asked.append((written, "grounded"))
            if "answerable" in self.enabled:
                requests.append(("answer_from_contexts", {"question": written.asked, "contexts": text}))
                asked.append((written, "answerable"))
        attempts: list[tuple[Written, str]] = []
        for (written, check), reply in zip(asked, self._ask(requests) if requests else []):
            if written.dropped:
                continue
            if reply.error:
                written.drop("failed", f"the {check} check: {reply.error}")
            elif check == "grounded":
                self._grounded(written, reply.value)
            else:
                attempts.extend(self._attempted(written, reply.value))
        self._matched([(w, a) for w, a in attempts if not w.dropped])

    def _contexts(self, written: Written) -> list[Chunk]:
        """The chunks the answerable check gives the judge: the candidate's own; for an unanswerable
        question, the corpus's best-matching chunks."""
        if written.candidate.type != "unanswerable":
            return list(written.candidate.chunks)
        if self._retriever is None:
            self._retriever = BM25Retriever(self.chunks, self.keywords)
        top = self._retriever.search(self._retriever.prepare(written.asked), self.settings.unanswerable_top_k)
        return [self.chunks[i] for i, _ in top] or list(written.candidate.chunks)

    def _grounded(self, written: Written, value: dict[str, Any]) -> None:
        if said_yes(value):
            written.checks["grounded"] = f"pass: the judge: {value.get('reason', '')}".rstrip(": ")
        else:
            written.drop("grounded", f"the reference answer does not follow from its contexts: {value.get('reason', '')}")

    def _attempted(self, written: Written, value: dict[str, Any]) -> list[tuple[Written, str]]:
        """An answerable question goes on to the match with the judge's answer; an unanswerable one
        passes when the judge found no answer."""
        found = bool(value["answerable"]) and bool(str(value.get("answer", "")).strip())
        if written.candidate.type == "unanswerable":
            if found:
                written.drop("answerable", f"the best-matching chunks ({', '.join(c.id for c in written.contexts)}) "
                                           f"answer it: {value['answer']}")
            else:
                written.checks["answerable"] = "pass: no answer in the best-matching chunks"
            return []
        if not found:
            written.drop("answerable", "the judge found no answer in its contexts")
            return []
        return [(written, str(value["answer"]))]

    def _matched(self, attempts: list[tuple[Written, str]]) -> None:
        requests = [("answer_correctness", {"question": w.asked, "reference": w.said, "answer": a})
                    for w, a in attempts]
        for (written, attempt), reply in zip(attempts, self._ask(requests) if requests else []):
            if reply.error:
                written.drop("failed", f"the answerable check: {reply.error}")
            elif said_yes(reply.value):
                written.checks["answerable"] = f"pass: the judge answered from its contexts: {attempt}"
            else:
                written.drop("answerable", f"the judge answered from its contexts {attempt!r}, which does not match "
                                           f"the reference")


def _claim(written: Written) -> str:
    if language(written.asked) == "zh":
        return f"问题“{written.asked}”的答案是：{written.said}"
    return f"The answer to the question '{written.asked}' is: {written.said}"

