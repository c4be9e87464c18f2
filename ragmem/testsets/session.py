"""What a generation of LLM-written questions keeps while it runs, so that nothing paid for is paid
twice: its state file and, when ``judge.cache`` is off, a cache of its own; and what ``--dry-run``
says it would ask.

- **State** ``.FILE.generate.json`` beside the output, written before the first request and removed
  when the test set is written: what was asked for (the corpus's digest, the settings that shape the
  requests). ``--resume`` needs it and the same settings (a changed setting is named: its requests
  would differ); a run without ``--resume`` that finds one says so and reuses the replies too.
- **Replies**: the judge cache as every judge request (``judge.cache``, ``judge.cache_dir``); with
  ``judge.cache: false``, a private cache ``.FILE.generate-cache/`` beside the output, removed with the
  state. So Ctrl+C (or an endpoint that stopped answering) loses no reply that arrived, and ``--resume``
  asks only the rest.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ragmem.errors import RagmemError
from ragmem.prompts.templates import estimate_tokens
from ragmem.runtime.space import kept as space_kept


def state_path(output: Path) -> Path:
    return output.with_name(f".{output.name}.generate.json")


def private_cache(output: Path) -> Path:
    return output.with_name(f".{output.name}.generate-cache")


def fingerprint(chunks: Sequence[Any], shaping: dict[str, Any]) -> dict[str, Any]:
    """What decides the requests: the chunks' digest and the settings that shape them."""
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(f"{chunk.id}\0{chunk.text}\0".encode())
    return {"chunks_sha256": digest.hexdigest(), **shaping}


class State:
    """The state file of one output (module docstring)."""

    def __init__(self, output: Path):
        self.path = state_path(output)
        self.output = output

    def found(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def check(self, wanted: dict[str, Any], resume: bool) -> str | None:
        """``--resume`` checked against the state found (before any request, the endpoint's probe
        included); the line to say, if any."""
        found = self.found()
        if resume and found is None:
            raise RagmemError(f"--resume: no interrupted generate of {self.output} (no {self.path.name} beside it): "
                              "leave out --resume")
        if found is None:
            return None
        if resume:
            changed = [k for k in sorted(set(wanted) | set(found)) if wanted.get(k) != found.get(k)]
            if changed:
                what = "the documents" if changed[0] == "chunks_sha256" else changed[0]
                raise RagmemError(f"--resume: {what} changed since the interrupted generate of {self.output} "
                                  f"({_shown(found.get(changed[0]))} then, {_shown(wanted.get(changed[0]))} now): "
                                  "its requests would differ; run without --resume to start again")
            return f"resuming the interrupted generate of {self.output}: what was answered is not asked again"
        return (f"an interrupted generate of {self.output} was found: its replies are reused where the requests "
                "are the same (as --resume would)")

    def begin(self, wanted: dict[str, Any]) -> None:
        """The state written, before the first request."""
        space_kept(lambda: self.path.write_text(json.dumps(wanted, ensure_ascii=False), encoding="utf-8"),
                   self.path.parent)

    def end(self) -> None:
        """The test set is written: the state and a private cache go."""
        self.path.unlink(missing_ok=True)
        shutil.rmtree(private_cache(self.output), ignore_errors=True)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:12] + "..."


@dataclass
class Estimate:
    """What the first round would ask (``--dry-run``)."""

    writes: int
    cached: int
    checks_at_most: int
    tokens_in: int
    tokens_out: int
    cost_usd: float | None

    def lines(self, rounds: int) -> list[str]:
        cost = ("no price set for the model (judge.prices)" if self.cost_usd is None
                else f"at most ${self.cost_usd:.4f}")
        return [f"first round: {self.writes} write requests ({self.cached} cached), at most {self.checks_at_most} "
                "check requests (fewer: a check is asked only of the questions still in)",
                f"estimated: {self.tokens_in:,} input tokens, at most {self.tokens_out:,} output tokens; cost {cost}",
                f"later rounds (at most {rounds - 1}) ask again for the types the checks left short"]


def estimate(client: Any, requests: Sequence[tuple[str, dict[str, str]]], checks_per_write: Sequence[int]) -> Estimate:
    """The first round's writes counted exactly (and their cached share); each check request bounded
    by a write's own prompt size (the check sees the same passages) and a short reply."""
    tokens_in = tokens_out = cached = 0
    cache = getattr(client, "cache", None)
    for (task, fields), checks in zip(requests, checks_per_write):
        messages, key = client.request(task, fields)
        if cache is not None and key in cache:
            cached += 1
            continue
        size = sum(estimate_tokens(m["content"]) for m in messages)
        limit = client.reply_limit(task, fields)
        tokens_in += size * (1 + checks)
        tokens_out += limit * (1 + checks)
    price = client.prices.get(client.model)
    cost = None if price is None else price.usd(tokens_in, tokens_out)
    return Estimate(len(requests), cached, sum(checks_per_write), tokens_in, tokens_out, cost)


def checks_of(kind: str, enabled: Sequence[str]) -> int:
    """The check requests one written question of ``kind`` may need, at most."""
    if kind == "unanswerable":
        return int("answerable" in enabled)
    return int("grounded" in enabled) + 2 * int("answerable" in enabled)

