"""``rubric_<name>``: the config's own criteria (``rubrics:``), each scored by the LLM judge.

Per example the judge's score on the rubric's scale, normalised to 0..1 (:func:`ragmem.prompts.rubrics.normalise`:
binary s, 1-5 (s - 1) / 4, 0-10 s / 10), with its reason (column ``rubric_<name>_reason``); with
``judge.samples`` N > 1 the mean of the N samples' scores. Per run::

    rubric_<name> = mean of the normalised scores over the examples scored

(null when none was), with its bootstrap interval; ``rubric_<name>_failures`` counts the examples
whose request failed (after retries and one repair; the reason in ``rubric_<name>_error``). An
example whose agent call failed is not asked. Every rubric of the config is computed, named in
``metrics`` or not. With ``judge.batch_rubrics`` one request per example scores every rubric
(the reply carries a score per rubric; an invalid reply fails all of them), else one request per
rubric and example.

>>> import pandas as pd
>>> from ragmem.prompts.rubrics import check
>>> from types import SimpleNamespace
>>> class Scripted:  # a judge that gives every answer 4 out of 5
...     def run(self, requests):
...         return [SimpleNamespace(value={"score": 4, "reason": "clear"}, error=None) for _ in requests]
>>> table = pd.DataFrame({"query": ["q", "q"], "generated_answer": ["a", None], "reference_answer": ["r", "r"],
...                       "contexts": [[], []], "error": [None, "timed out"]})
>>> rubric = check("clarity", "The answer is clear.", "1-5", ["answer"])
>>> result = score_rubrics(table.itertuples(index=False), [rubric], Scripted(), batch=False)
>>> result.values, result.columns["rubric_clarity"]
({'rubric_clarity': 0.75, 'rubric_clarity_failures': 0.0}, [0.75, None])
"""

from __future__ import annotations

import collections
from typing import Any, Sequence

import pandas as pd

from ragmem.metrics import names, needs
from ragmem.metrics.base import counted_note, failed, Family, mean_aggregator, MetricResult, nanmean, scored_mask
from ragmem.prompts import rubrics as rubric_prompts


def groups(rubrics: Sequence[rubric_prompts.Rubric], batch: bool) -> list[list[rubric_prompts.Rubric]]:
    """The rubrics asked together: all in one request (``judge.batch_rubrics``), else one each."""
    return [list(rubrics)] if batch and rubrics else [[r] for r in rubrics]


def score_rubrics(rows: Any, rubrics: Sequence[rubric_prompts.Rubric], llm: Any, batch: bool) -> MetricResult:
    """Ask ``llm`` (a :class:`ragmem.clients.llm_client.JudgeClient`) to score every answered row on ``rubrics``."""
    rows = list(rows)
    todo = [i for i, row in enumerate(rows) if not failed(row)]
    requests, plan = [], []
    for group in groups(rubrics, batch):
        task = rubric_prompts.task_of(group)
        for i in todo:
            row = rows[i]
            contexts = [c["text"] if isinstance(c, dict) else str(c) for c in (row.contexts or [])]
            requests.append((task, rubric_prompts.fields_of(group, row.query or "", row.generated_answer or "",
                                                            needs.reference(row), contexts)))
            plan.append((group, i))
    replies = llm.run(requests) if requests else []
    values: dict[str, list[Any]] = {r.name: [None] * len(rows) for r in rubrics}
    reasons: dict[str, list[Any]] = {r.name: [None] * len(rows) for r in rubrics}
    errors: dict[str, list[Any]] = {r.name: [None] * len(rows) for r in rubrics}
    for (group, i), reply in zip(plan, replies):
        scores = None if reply.error else rubric_prompts.scores_of(group, reply.value)
        for rubric in group:
            if scores is None:
                errors[rubric.name][i] = reply.error
            else:
                values[rubric.name][i] = rubric_prompts.normalise(rubric.scale, float(scores[rubric.name]["score"]))
                reasons[rubric.name][i] = scores[rubric.name].get("reason")
    result = MetricResult(values={})
    for rubric in rubrics:
        metric, failures = rubric.metric, [e for e in errors[rubric.name] if e is not None]
        result.values[metric] = nanmean(values[rubric.name])
        result.values[f"{metric}_failures"] = float(len(failures))
        result.columns.update({metric: values[rubric.name], f"{metric}_reason": reasons[rubric.name],
                               f"{metric}_error": errors[rubric.name]})
        if failures:
            reason, count = collections.Counter(failures).most_common(1)[0]
            result.notes.append(counted_note(  # (a chunked run: its first chunk's most frequent reason)
                f"rubric.{metric}", lambda n, of, c, metric=metric, reason=reason:
                f"{metric}: {n} of {of} answered examples could not be scored (most often, {c}: {reason})",
                len(failures), len(todo), count))
    return result


def compute(table: pd.DataFrame, ctx, wanted) -> MetricResult:
    rubrics = [r for r in ctx.rubrics if r.metric in wanted]
    if not rubrics:
        return MetricResult(values={})
    if ctx.llm is None:  # (the settings refuse rubrics without an LLM judge)
        raise ValueError("rubrics need an LLM judge (judge.type llm)")
    batch = bool(getattr(ctx.judge, "batch_rubrics", False))
    return score_rubrics(ctx.rows(table), rubrics, ctx.llm, batch)


def aggregators(table: pd.DataFrame, names_, zero_division: float, scorer=None) -> dict:
    ok = scored_mask(table)
    return {n: mean_aggregator(table[n], ok) for n in names_ if n in table and not n.endswith("_failures")}


FAMILY = Family(names.RUBRIC, compute, aggregators)
