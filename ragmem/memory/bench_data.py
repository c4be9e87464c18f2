"""The datasets of ``ragmem bench-memory`` (``bench.dataset``), each with what makes its scores its own.

A :class:`BenchData` holds a dataset's reader, its category table with the source of that mapping
(logged with every run), its abstention category, how ``bench.limit_conversations`` and
``bench.limit_questions`` choose the questions, and how its answers are judged: the LLM judge's
task per question (:data:`ragmem.prompts.templates.TASKS`) and the offline judge's verdict.

    locomo       LoCoMo (:mod:`ragmem.memory.locomo`): conversations with many questions each; the overall
                 score over categories 1-4 as published, category 5 scored as abstention
    longmemeval  LongMemEval (:mod:`ragmem.memory.longmemeval`): one question per chat history; per-type
                 judge prompts; ``_abs`` questions scored as abstention
    beam         BEAM (:mod:`ragmem.memory.beam`): conversations with probing questions of ten abilities,
                 each scored by its rubric (0 / 0.5 / 1 an item); abstention an ability in the overall
    lifecycle    ragmem's lifecycle suite (:mod:`ragmem.memory.lifecycle`): generated scenarios of recall,
                 update, contradiction, deletion, distractors and sessions apart, checked exactly
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ragmem.data.hashing import file_sha256
from ragmem.errors import ConfigError
from ragmem.memory import beam, lifecycle, locomo, longmemeval
from ragmem.memory.locomo import Conversation, QA, round_robin


def _locomo_select(conversations: Sequence[Conversation], limit_conversations: int | None,
                   limit_questions: int | None) -> dict[str, list[QA]]:
    return {c.id: locomo.questions(c, limit_questions) for c in list(conversations)[:limit_conversations]}


def _longmemeval_select(conversations: Sequence[Conversation], limit_conversations: int | None,
                        limit_questions: int | None) -> dict[str, list[QA]]:
    pool = list(conversations)[:limit_conversations]
    picked = {id(q) for q in round_robin([c.qa[0] for c in pool], limit_questions)}
    return {c.id: [c.qa[0]] for c in pool if id(c.qa[0]) in picked}


def _keep(qa: QA, keyword_verdict: int | None, answer: str) -> int | None:
    return keyword_verdict


@dataclass(frozen=True)
class BenchData:
    name: str
    title: str
    categories: dict[int, str]
    abstention: int
    source: str
    load: Callable[[str], list[Conversation]]
    select: Callable[[Sequence[Conversation], int | None, int | None], dict[str, list[QA]]]
    selection: str  # how the limits choose the questions, in words (the manifest)
    tasks: dict[int, str]  # the LLM judge's task per category; absent: the judge's own (answer_correctness)
    offline: Callable[[QA, int | None, str], int | None] = _keep  # the offline verdict from the keyword one
    rubrics: frozenset[int] = frozenset()  # categories whose reference is a rubric, not an answer: no F1/BLEU-1
    by_rubric: bool = False  # each question scored by its rubric items (BEAM): judge_score the items' mean
    overall_abstention: bool = False  # the abstention category counted in the overall score (BEAM's), not apart
    planted: bool = False  # each question checked against its scenario's planted truth (the lifecycle suite)
    generated: bool = False  # its conversations generated (bench.data: the generator's settings, or none)

    def digest(self, data: Any) -> str:
        """The sha256 of the data as read (the manifest): the files', or a generated suite's settings'."""
        if self.generated:
            return hashlib.sha256(str(data or "").encode()).hexdigest()
        return file_sha256(str(data))

    @property
    def results(self) -> str:
        """The parent run's table (``<name>_results.csv``/``.json``)."""
        return f"{self.name}_results"

    def mapping(self) -> dict[str, Any]:
        """The category table as logged (``bench.categories``) and kept in the manifest."""
        return {"mapping": self.categories, "abstention": self.abstention, "source": self.source}


DATASETS = {
    "locomo": BenchData(
        "locomo", "LoCoMo", locomo.CATEGORIES, locomo.ABSTENTION, locomo.CATEGORY_SOURCE, locomo.load_locomo,
        _locomo_select,
        "every question of the first bench.limit_conversations conversations (all: null); with bench.limit_questions "
        "N, N per conversation taken round-robin across the categories, in conversation order within each",
        {locomo.ABSTENTION: "abstention"}),
    "longmemeval": BenchData(
        "longmemeval", "LongMemEval", longmemeval.CATEGORIES, longmemeval.ABSTENTION, longmemeval.CATEGORY_SOURCE,
        longmemeval.load_longmemeval, _longmemeval_select,
        "the first bench.limit_conversations questions of the file (all: null), each with its own history; with "
        "bench.limit_questions N, N of them taken round-robin across the question types (abstention one of them), "
        "in file order within each",
        longmemeval.TASKS, longmemeval.offline_verdict, frozenset({longmemeval.PREFERENCE})),
    "beam": BenchData(
        "beam", "BEAM", beam.CATEGORIES, beam.ABSTENTION, beam.CATEGORY_SOURCE, beam.load_beam, _locomo_select,
        "every probing question of the first bench.limit_conversations conversations (all: null), in path order; "
        "with bench.limit_questions N, N per conversation taken round-robin across the ten abilities",
        {}, rubrics=frozenset(beam.CATEGORIES), by_rubric=True, overall_abstention=True),
    "lifecycle": BenchData(
        "lifecycle", "the lifecycle suite", lifecycle.CATEGORIES, lifecycle.DELETION, lifecycle.CATEGORY_SOURCE,
        lifecycle.load_lifecycle, _locomo_select,
        "every generated scenario (bench.data: seed:N/per_kind:K; default seed 0, 2 of each kind a language)",
        {}, rubrics=frozenset(lifecycle.CATEGORIES), overall_abstention=True, planted=True, generated=True),
}


SUITES = tuple(name for name, data in DATASETS.items() if data.generated)  # (bench-memory --suite)


def dataset(name: str) -> BenchData:
    try:
        return DATASETS[name]
    except KeyError:
        raise ConfigError(f"bench.dataset: unknown dataset {name!r}; available: {', '.join(DATASETS)}") from None
