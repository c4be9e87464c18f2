"""What a request of one task is and what its reply must be, whichever prompts it comes from: the
judge's built-in tasks (:mod:`ragmem.prompts.templates`), the config's rubrics
(:mod:`ragmem.prompts.rubrics`, task ``rubric:NAME``) or the test-set writer's
(:mod:`ragmem.prompts.generation`). The judge client (:mod:`ragmem.clients.llm_client`) asks every
task through its :class:`Contract`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ragmem.prompts import generation, rubrics as rubric_prompts, templates


@dataclass(frozen=True)
class Contract:
    """One task's messages, reply schema and validation.

    - ``kind``: the reply's name (``verdict``, ``rubric``, ``written``, ...); ``schema``: its JSON
      schema (``response_format`` json_schema); ``shape``: the shape the repair request shows;
    - ``messages(fields)``; ``validate(reply)``: ``None`` or what is wrong;
    - ``sampled``: asked ``judge.samples`` times (a verdict, a rubric's score);
    - ``listing``: the field a list reply lists from (its length bounds the reply), or ``None``;
    - ``version``: added to the cache key (a rubric's versions, the generation prompts' hash).
    """

    kind: str
    schema: dict[str, Any]
    shape: str
    messages: Callable[[dict[str, str]], list[dict[str, str]]]
    validate: Callable[[Any], str | None]
    sampled: bool = False
    listing: str | None = None
    version: Any = None


def contract_of(task: str, rubrics: Mapping[str, rubric_prompts.Rubric] = {}, prompt_variant: str = "default") -> Contract:
    """The contract of ``task``: a rubric task, a generation task or a built-in one (KeyError if none)."""
    if task.startswith(rubric_prompts.TASK_PREFIX):
        chosen = [rubrics[name] for name in rubric_prompts.names_of(task)]
        return Contract("rubric", rubric_prompts.schema(chosen), rubric_prompts.shape(chosen),
                        lambda fields: rubric_prompts.messages(chosen, fields),
                        lambda reply: rubric_prompts.validate(chosen, reply), sampled=True,
                        version=[r.prompt_version for r in chosen])
    if task in generation.TASKS:
        kind = generation.TASKS[task]["kind"]
        return Contract(kind, generation.SCHEMAS[kind], generation.SHAPES[kind],
                        lambda fields: generation.build_messages(task, **fields),
                        lambda reply: generation.validate(kind, reply), version=generation.generation_hash())
    kind = templates.TASKS[task]["kind"]
    return Contract(kind, templates.SCHEMAS[kind], templates._SHAPES[kind],
                    lambda fields: templates.build_messages(task, prompt_variant=prompt_variant, **fields),
                    lambda reply: templates.validate(kind, reply), sampled=kind == "verdict",
                    listing={"entities": "text", "claims": "answer", "statements": "answer"}.get(task))
