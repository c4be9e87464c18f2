"""Memory-benchmark tasks: load LoCoMo, run one conversation through a memory layer, judge, score."""

from __future__ import annotations

from typing import Any, Sequence

from prefect import task
from prefect.cache_policies import NO_CACHE

from ragmem import memory_bench
from ragmem.judges import JudgeItem
from ragmem.locomo import Conversation, QA, load_locomo


@task(name="load-locomo", cache_policy=NO_CACHE)
def load_conversations(path: str) -> list[Conversation]:
    """Every conversation of the dataset (zip, folder, file or locomo10.json)."""
    return load_locomo(path)


@task(name="memory-conversation", cache_policy=NO_CACHE, task_run_name="{method}-{conversation.id}")
def memory_conversation(method: str, layer: Any, conversation: Conversation, qas: Sequence[QA], top_k: int,
                        generate) -> tuple[list[memory_bench.Answered], list[float]]:
    """Ingest the conversation session by session, then answer its questions from recalled memories."""
    return memory_bench.run_conversation(layer, conversation, qas, top_k, generate)


@task(name="memory-judge", cache_policy=NO_CACHE, task_run_name="judge-{method}")
def judge_answers(method: str, judge, answered: Sequence[memory_bench.Answered]) -> list[int | None]:
    """The judge's verdict per answered question (None where the call or the judge failed)."""
    todo = [i for i, a in enumerate(answered) if a.error is None]
    items = [JudgeItem(answered[i].question.question, answered[i].answer or "", answered[i].question.answer)
             for i in todo]
    verdicts: list[int | None] = [None] * len(answered)
    for i, judgement in zip(todo, judge.judge(items) if items else []):
        verdicts[i] = judgement.verdict
    return verdicts
