"""Rubric metrics: criteria a user writes in the config (``rubrics:``), scored by the LLM judge.

A rubric is a name, its ``criteria``, optional evaluation ``steps``, a ``scale`` and the ``inputs``
the judge may see (any of query, answer, reference, contexts), with optional few-shot ``examples``.
Each becomes the metric ``rubric_<name>``: per example the judge's score normalised to 0..1 and its
reason; per run the mean with its interval.

Scales and their normalisation (a reply outside the scale is invalid: one repair, then a failure)::

    binary   0 or 1    s
    1-5      1..5      (s - 1) / 4
    0-10     0..10     s / 10

Replies (JSON objects)::

    one rubric     {"score": <integer>, "reason": "..."}
    a batch        {"<name>": {"score": <integer>, "reason": "..."}, ...}   (judge.batch_rubrics)

A request holds only the rubric's declared inputs (a batch: the inputs any of its rubrics declares),
as the same injection-proof ``<data>`` blocks as the built-in prompts (:mod:`ragmem.prompts.templates`); the
examples' inputs are escaped alike. A rubric's :attr:`Rubric.version` hashes its whole definition
and ``RUBRIC_PROMPT_VERSION``: it is logged with the run, part of the judge's signature and of every
request's cache key, so that editing a rubric never reuses a reply to its old text.

This module is the rubric's pure core (no pydantic, no client): the settings schema
(:class:`ragmem.config.settings.RubricSettings`) validates with :func:`check`, the judge client
(:mod:`ragmem.clients.llm_client`) builds and validates requests with :func:`messages` and :func:`validate`, and
the metric family (:mod:`ragmem.metrics.rubric`) normalises with :func:`normalise`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ragmem.prompts.templates import _escape, numbered, SYSTEM

RUBRIC_PROMPT_VERSION = "rubric-2026-12-02.1"
SCALES: dict[str, tuple[int, int]] = {"binary": (0, 1), "1-5": (1, 5), "0-10": (0, 10)}
INPUTS = ("query", "answer", "reference", "contexts")  # in the order they appear in a request
NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
TASK_PREFIX = "rubric:"  # a request's task: rubric:NAME, or rubric:A+B+C for a batch


@dataclass(frozen=True)
class Example:
    inputs: tuple[tuple[str, str], ...]  # (input name, text), in INPUTS order
    score: int
    reason: str = ""


@dataclass(frozen=True)
class Rubric:
    name: str
    criteria: str
    scale: str
    inputs: tuple[str, ...]
    steps: tuple[str, ...] = ()
    examples: tuple[Example, ...] = ()

    @property
    def metric(self) -> str:
        return f"rubric_{self.name}"

    @property
    def version(self) -> str:
        """sha256 (first 12 hex digits) of the definition and the rubric prompt's version."""
        payload = json.dumps({"v": RUBRIC_PROMPT_VERSION, "system": SYSTEM, "name": self.name,
                              "criteria": self.criteria, "scale": self.scale, "inputs": self.inputs,
                              "steps": self.steps, "examples": [[list(e.inputs), e.score, e.reason] for e in self.examples]},
                             sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]

    @property
    def prompt_version(self) -> str:
        return f"{RUBRIC_PROMPT_VERSION}#{self.version}"


def check(name: str, criteria: str, scale: str, inputs: Sequence[str], steps: Sequence[str] = (),
          examples: Sequence[dict[str, Any]] = ()) -> Rubric:
    """The rubric, or a ValueError naming what is wrong (the settings schema prefixes the setting).

    >>> check("cites", "Cites its sources.", "1-5", ["answer", "contexts"]).inputs
    ('answer', 'contexts')
    >>> check("cites", "Cites.", "1-5", ["answer"], examples=[{"inputs": {"answer": "a"}, "score": 7}])
    Traceback (most recent call last):
    ...
    ValueError: examples[0].score: must be an integer from 1 to 5 (scale 1-5), got 7
    """
    if not NAME.match(name) or name.endswith(("_failures", "_reason", "_error")):
        raise ValueError(f"rubric name {name!r}: expected lowercase letters, digits and _, starting with a letter, "
                         f"not ending with _failures, _reason or _error (it becomes the metric rubric_{name})")
    if not criteria.strip():
        raise ValueError("criteria: must not be empty")
    if scale not in SCALES:
        raise ValueError(f"scale: expected one of {', '.join(SCALES)}, got {scale!r}")
    unknown = [i for i in inputs if i not in INPUTS]
    if unknown or not inputs:
        raise ValueError(f"inputs: expected one or more of {', '.join(INPUTS)}, got {list(inputs)!r}")
    if any(not s.strip() for s in steps):
        raise ValueError("steps: a step must not be empty")
    out = []
    for i, example in enumerate(examples):
        given = example.get("inputs") or {}
        extra = sorted(set(given) - set(inputs))
        if extra:
            raise ValueError(f"examples[{i}].inputs: {', '.join(extra)} is not among the rubric's inputs "
                             f"({', '.join(inputs)})")
        problem = _score_problem(example.get("score"), scale)
        if problem:
            raise ValueError(f"examples[{i}].score: {problem}")
        texts = tuple((k, _text(given[k])) for k in INPUTS if k in given)
        out.append(Example(texts, int(example["score"]), example.get("reason") or ""))
    return Rubric(name, criteria.strip(), scale, tuple(i for i in INPUTS if i in inputs),
                  tuple(s.strip() for s in steps), tuple(out))


def _text(value: Any) -> str:
    """An input's text: contexts (a list) numbered one per block line, anything else as is."""
    if isinstance(value, (list, tuple)):
        return numbered(str(v) for v in value)
    return str(value)


def normalise(scale: str, score: float) -> float:
    """A score on ``scale`` as 0..1.

    >>> normalise("binary", 1), normalise("1-5", 4), normalise("0-10", 7)
    (1.0, 0.75, 0.7)
    """
    low, high = SCALES[scale]
    return (score - low) / (high - low)


def _score_problem(score: Any, scale: str) -> str | None:
    low, high = SCALES[scale]
    integral = isinstance(score, int) or (isinstance(score, float) and score.is_integer())
    if isinstance(score, bool) or not integral or not low <= score <= high:
        return f"must be an integer from {low} to {high} (scale {scale}), got {score!r}"
    return None


# ---- requests ----------------------------------------------------------------------------------

def task_of(rubrics: Sequence[Rubric]) -> str:
    """The task name of a request for ``rubrics`` (one, or a batch)."""
    return TASK_PREFIX + "+".join(r.name for r in rubrics)


def names_of(task: str) -> list[str]:
    return task[len(TASK_PREFIX):].split("+")


def fields_of(rubrics: Sequence[Rubric], query: str, answer: str, reference: str, contexts: Sequence[str]) -> dict[str, str]:
    """The data of one example that ``rubrics`` may see (their declared inputs, nothing else)."""
    given = {"query": query, "answer": answer, "reference": reference, "contexts": _text(list(contexts))}
    wanted = {i for r in rubrics for i in r.inputs}
    return {k: given[k] for k in INPUTS if k in wanted}


def _blocks(pairs: Sequence[tuple[str, str]]) -> str:
    return "\n".join(f'<data name="{name}">\n{_escape(text)}\n</data>' for name, text in pairs)


def _section(rubric: Rubric, heading: str) -> str:
    low, high = SCALES[rubric.scale]
    scale = "0 (fails) or 1 (meets)" if rubric.scale == "binary" else f"an integer from {low} (worst) to {high} (best)"
    lines = [f"{heading}Criteria: {rubric.criteria}",
             f"Judge only from: {', '.join(rubric.inputs)}. Score: {scale}."]
    if rubric.steps:
        lines.append("Evaluation steps:")
        lines += [f"{i}. {step}" for i, step in enumerate(rubric.steps, 1)]
    for i, example in enumerate(rubric.examples, 1):
        lines.append(f'<example n="{i}">\n{_blocks(example.inputs)}\nscore: {example.score}; reason: '
                     f'{_escape(example.reason)}\n</example>')
    return "\n".join(lines)


def shape(rubrics: Sequence[Rubric]) -> str:
    if len(rubrics) == 1:
        return '{"score": <integer>, "reason": "<one sentence>"}'
    return "{" + ", ".join(f'"{r.name}": {{"score": <integer>, "reason": "<one sentence>"}}' for r in rubrics) + "}"


def messages(rubrics: Sequence[Rubric], fields: dict[str, str]) -> list[dict[str, str]]:
    """The chat messages that ask for ``rubrics``' scores of one example's ``fields``."""
    if len(rubrics) == 1:
        intro = "Score the data against the criteria below."
        body = _section(rubrics[0], "")
    else:
        intro = "Score the data against each rubric below, separately."
        body = "\n\n".join(_section(r, f'Rubric "{r.name}". ') for r in rubrics)
    if any(r.examples for r in rubrics):
        intro += " The <example> blocks are scored examples, for calibration only."
    data = _blocks([(k, fields[k]) for k in INPUTS if k in fields])
    user = f"{intro}\n\n{body}\n\nReply with JSON only: {shape(rubrics)}\n\n{data}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def _one_schema(rubric: Rubric) -> dict[str, Any]:
    low, high = SCALES[rubric.scale]
    return {"type": "object", "properties": {"score": {"type": "integer", "enum": list(range(low, high + 1))},
                                             "reason": {"type": "string"}},
            "required": ["score", "reason"], "additionalProperties": False}


def schema(rubrics: Sequence[Rubric]) -> dict[str, Any]:
    """The reply's JSON schema (``response_format`` json_schema)."""
    if len(rubrics) == 1:
        return _one_schema(rubrics[0])
    return {"type": "object", "properties": {r.name: _one_schema(r) for r in rubrics},
            "required": [r.name for r in rubrics], "additionalProperties": False}


def _one_problem(rubric: Rubric, reply: Any, where: str) -> str | None:
    if not isinstance(reply, dict):
        return f"expected a JSON object{where}, got {type(reply).__name__}"
    problem = _score_problem(reply.get("score"), rubric.scale)
    if problem:
        return f"'{where.strip(' :') + '.' if where else ''}score' {problem}"
    return None if isinstance(reply.get("reason", ""), str) else "'reason' must be a string"


def validate(rubrics: Sequence[Rubric], reply: Any) -> str | None:
    """``None`` when ``reply`` scores every rubric on its scale, else what is wrong.

    >>> r = check("tone", "Polite.", "1-5", ["answer"])
    >>> validate([r], {"score": 7, "reason": "x"})
    "'score' must be an integer from 1 to 5 (scale 1-5), got 7"
    """
    if len(rubrics) == 1:
        return _one_problem(rubrics[0], reply, "")
    if not isinstance(reply, dict):
        return f"expected a JSON object, got {type(reply).__name__}"
    for rubric in rubrics:
        if rubric.name not in reply:
            return f"no score for rubric '{rubric.name}'"
        problem = _one_problem(rubric, reply[rubric.name], f" {rubric.name}:")
        if problem:
            return problem
    return None


def scores_of(rubrics: Sequence[Rubric], reply: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{name: {"score": raw score, "reason": ...}}`` of a valid reply (one rubric, or a batch)."""
    if len(rubrics) == 1:
        return {rubrics[0].name: reply}
    return {r.name: reply[r.name] for r in rubrics}


def stand_in(rubrics: Sequence[Rubric]) -> dict[str, Any]:
    """A valid reply (``ragmem run --dry-run`` sizes requests with it): each rubric's middle score."""
    replies = {r.name: {"score": sum(SCALES[r.scale]) // 2, "reason": "A stand-in reason of about one sentence."}
               for r in rubrics}
    return replies[rubrics[0].name] if len(rubrics) == 1 else replies


def combine(rubrics: Sequence[Rubric], replies: Sequence[Any]) -> dict[str, Any]:
    """One reply from the valid replies to a request's ``judge.samples`` samples: each rubric's
    score is the mean of its samples' (a float), with the first sample's reason and every sample's
    score kept (``samples``).

    >>> r = check("tone", "Polite.", "1-5", ["answer"])
    >>> combine([r], [{"score": 4, "reason": "a"}, {"score": 5, "reason": "b"}])
    {'score': 4.5, 'reason': 'a', 'samples': [4.0, 5.0]}
    """
    out = {}
    for rubric in rubrics:
        each = [scores_of(rubrics, v)[rubric.name] for v in replies]
        scores = [float(e["score"]) for e in each]
        out[rubric.name] = {"score": sum(scores) / len(scores), "reason": each[0].get("reason"), "samples": scores}
    return out[rubrics[0].name] if len(rubrics) == 1 else out
