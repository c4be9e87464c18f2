"""What the LLM clients (:mod:`ragmem.clients.llm_client`) return and count: one :class:`Result` per item, the
:class:`Usage` of an endpoint, and :func:`combine`, the majority of a verdict's ``judge.samples``."""

from __future__ import annotations

import collections
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Sequence

from ragmem.data.fields import lone_surrogate
from ragmem.metrics.estimators import majority
from ragmem.prompts import rubrics as rubric_prompts
from ragmem.prompts.templates import said_yes

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose every key is given once: ``{"verdict": "no", "verdict": "yes"}`` would
    otherwise be read as its last value, a pass the reply never clearly gave."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(f"key {key!r} given twice")
        out[key] = value
    return out


def parse_json(content: str | None) -> tuple[Any, str | None]:
    """A reply's JSON value, or ``None`` with why it is not one: empty, not valid JSON, an object
    with a key given twice, or text that is not Unicode (a lone surrogate, which no file can hold; a
    JSON ``\\u`` escape of half a pair): an invalid reply, repaired once, then a recorded failure, never
    a verdict.

    >>> parse_json('{"verdict": "no", "verdict": "yes"}')
    (None, "invalid reply: key 'verdict' given twice")
    >>> parse_json('```json {"verdict": "yes"} ```')
    ({'verdict': 'yes'}, None)
    >>> parse_json('{"verdict": "yes", "reason": "half \\\\ud800 a pair"}')
    (None, 'invalid reply: a lone surrogate U+D800 in it (half of a character pair: not Unicode text)')
    """
    if not content or not content.strip():
        return None, "empty reply"
    text = _FENCE.sub("", content.strip())
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg} at char {exc.pos})"
    except _DuplicateKey as exc:
        return None, f"invalid reply: {exc}"
    half = lone_surrogate(json.dumps(value, ensure_ascii=False))  # (the content's own, or a \\u escape's)
    if half is not None:  # no file could hold its reason: the run's table would fail to be written
        return None, f"invalid reply: a lone surrogate {half} in it (half of a character pair: not Unicode text)"
    return value, None


@dataclass
class Result:
    value: Any = None
    error: str | None = None
    votes: tuple[int, ...] | None = None  # a verdict asked judge.samples > 1 times: each valid sample's 0/1


def other_models(asked: str, seen: collections.Counter) -> list[str]:
    """The models the replies named (``seen``) that are not ``asked`` (a dated snapshot or a tag of it,
    such as ``gpt-4o-mini-2024-07-18`` or ``llama3:latest`` for ``llama3``, is the same model).

    >>> other_models("llama3", collections.Counter({"llama3:latest": 3, "smollm2": 1}))
    ['smollm2']
    """
    asked = asked.lower()
    return sorted(m for m in seen if m.lower() != asked and not m.lower().startswith((asked + "-", asked + ":", asked + "@")))


def model_note(section: str, asked: str, seen: collections.Counter, prices: dict | None) -> str | None:
    """One line when the replies name another model than ``asked``: an endpoint serving whatever it
    has (a llama.cpp or Ollama server with one model loaded) answers as that model, and the run's
    params, signature and prices would otherwise say the model asked for."""
    others = other_models(asked, seen)
    if not others:
        return None
    total = sum(seen.values())
    named = ", ".join(f"'{m}' ({seen[m]} of {total} replies)" for m in others)
    line = (f"{section}.model is '{asked}' but the endpoint's replies name {named}: the scores are "
            f"that model's, while the run's params and signature say '{asked}' (tag ragmem.{section}.replied_model)")
    if prices:
        priced = "priced as" if asked in prices else "not priced: no price of"
        line += f"; {section}_cost_usd is {priced} '{asked}' ({section}.prices), not as {', '.join(repr(m) for m in others)}"
    return line


def rerun_note(section: str, n: int) -> str | None:
    """One line when ``n`` requests that failed in an earlier run were sent again: a failure is never
    cached, so an "identical" rerun asks them again, and its numbers may move.

    >>> rerun_note("judge", 1)[:60]
    'judge: 1 request that failed in an earlier run was sent agai'
    """
    if not n:
        return None
    return (f"{section}: {n} {'request' if n == 1 else 'requests'} that failed in an earlier run "
            f"{'was' if n == 1 else 'were'} sent again (a failure is never cached: the replies, and the "
            f"numbers resting on them, may differ from that run's)")


def combine(samples: Sequence[Result]) -> Result:
    """One verdict from the replies to its ``judge.samples`` requests: the majority of the valid
    ones (their 0/1 votes kept), with the reason of the first sample that voted with it. A tie is
    undecided (an error that says so: never silently a pass or a fail); no valid sample, the first
    failure.

    >>> yes, no = Result({"verdict": "yes", "reason": "a"}), Result({"verdict": "no", "reason": "b"})
    >>> combine([yes, no, yes]).value, combine([yes, no, yes]).votes
    ({'verdict': 'yes', 'reason': 'a'}, (1, 0, 1))
    >>> combine([yes, no, Result(error="timed out")]).error
    'undecided: 1 of 2 valid samples said yes (1 failed: timed out)'
    """
    if len(samples) == 1:
        return samples[0]
    valid = [r for r in samples if r.error is None]
    failed = [r.error for r in samples if r.error is not None]
    if not valid:
        return Result(error=failed[0])
    votes = tuple(int(said_yes(r.value)) for r in valid)
    winner, _ = majority(votes)
    if winner is None:
        extra = f" ({len(failed)} failed: {failed[0]})" if failed else ""
        return Result(error=f"undecided: {sum(votes)} of {len(votes)} valid samples said yes{extra}", votes=votes)
    first = next(r for r, v in zip(valid, votes) if v == winner)
    return Result({"verdict": "yes" if winner else "no", "reason": first.value.get("reason")}, votes=votes)


def combine_scores(rubrics: Sequence["rubric_prompts.Rubric"], samples: Sequence[Result]) -> Result:
    """One reply from the ``judge.samples`` samples of a rubric request: each rubric's score is the
    mean of the valid samples' (:func:`ragmem.prompts.rubrics.combine`); no valid sample, the first failure."""
    if len(samples) == 1:
        return samples[0]
    valid = [r.value for r in samples if r.error is None]
    if not valid:
        return next(r for r in samples if r.error is not None)
    return Result(rubric_prompts.combine(rubrics, valid))


@dataclass
class Usage:
    calls: int = 0            # requests sent to the endpoint (repairs and retries included)
    failures: int = 0         # items that ended without a valid reply
    cache_hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    items: int = 0            # items asked for (cached or not)
    models: collections.Counter = field(default_factory=collections.Counter)  # the model each reply names
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def saw(self, model: str | None) -> None:
        """A reply named ``model`` (the ``model`` field of an OpenAI-compatible response)."""
        if model:
            with self._lock:
                self.models[str(model)] += 1

    def add(self, **counts: float) -> None:
        with self._lock:
            for key, value in counts.items():
                setattr(self, key, getattr(self, key) + value)

    def as_metrics(self, prefix: str) -> dict[str, float]:
        out = {f"{prefix}_calls": self.calls, f"{prefix}_failures": self.failures,
               f"{prefix}_cache_hits": self.cache_hits, f"{prefix}_tokens_in": self.tokens_in,
               f"{prefix}_tokens_out": self.tokens_out, f"{prefix}_cost_usd": round(self.cost_usd, 8)}
        if self.items:
            out[f"{prefix}_cache_hit_rate"] = self.cache_hits / self.items
        return {k: float(v) for k, v in out.items()}


def distinct(keys: Sequence[Any]) -> tuple[list[int], list[int]]:
    """The positions of the first of each distinct key, and for every key the place of its first among
    them: identical requests of one batch are sent once and answered alike.

    >>> distinct(["a", "b", "a", "c", "b"])
    ([0, 1, 3], [0, 1, 0, 2, 1])
    """
    first: dict[Any, int] = {}
    sent: list[int] = []
    for n, key in enumerate(keys):
        if key not in first:
            first[key] = len(sent)
            sent.append(n)
    return sent, [first[key] for key in keys]


def kept(client: Any, requests: Sequence[tuple[str, dict[str, str]]]) -> int:
    """How many of ``requests`` (``(task, fields)``) have a reply in ``client``'s cache: what a rerun
    is not asked again (the count an interrupted command's last line gives)."""
    cache = getattr(client, "cache", None)
    return 0 if cache is None else sum(client.request(task, fields)[1] in cache for task, fields in requests)
