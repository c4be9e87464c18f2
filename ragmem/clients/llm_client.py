"""The one seam to LLM and embedding endpoints (OpenAI-compatible: OpenAI, Azure, Ollama, vLLM, llama.cpp).

- Async calls with at most ``max_concurrency`` in flight; ``run`` is the synchronous entry point.
- Retries with exponential backoff and jitter on 429, 5xx (not 501), timeouts and connection errors,
  honouring ``Retry-After``; the SDK's own retries are off so that this policy is the only one.
  400, 401, 403, 404, 422, 501 are not retried. Every attempt feeds the endpoint's circuit breaker
  (:mod:`ragmem.clients.endpoints`; a dead endpoint stops the run instead of failing every item).
- Temperature 0 and a seed by default. JSON replies are requested with ``response_format`` json_schema;
  an endpoint that rejects it (HTTP 400) is asked with json_object, then plain text, and the mode that
  worked is remembered. Every reply is validated against :mod:`ragmem.prompts.templates`; an invalid one gets
  one repair request, then the item is recorded as failed with its reason (never a silent 0).
- A persistent cache (diskcache) keyed by endpoint, model, prompt version and the full request: a
  rerun or a sweep pays nothing twice, and two models never share entries. Failures are not cached.
- Usage and cost (``prices``: USD per million tokens in/out per model) are counted. The API key is read
  from the environment variable ``api_key_env`` names, never stored.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import itertools
import json
import os
import threading
import weakref
from pathlib import Path
from typing import Any, Sequence

from ragmem.clients import calls, replies
from ragmem.clients.calls import describe as _describe
from ragmem.clients.endpoints import Breaker, EndpointDown, OPENAI_URL, sdk_target
from ragmem.clients.replies import parse_json, Result, Usage, combine, combine_scores  # noqa: F401  (also here: ...Result)
from ragmem.config.loading import as_section
from ragmem.config.settings import EmbeddingSettings, JudgeSettings
from ragmem.errors import ConfigError
from ragmem.prompts import rubrics as rubric_prompts, templates as prompts
from ragmem.prompts.contracts import Contract, contract_of
from ragmem.runtime import progress, space
from ragmem.runtime.home import ragmem_home

RESPONSE_MODES = ("json_schema", "json_object", "text")
SHORT_REPLY_TOKENS = 256  # a verdict with its reason, or a question: far below this


def _completion():
    """The SDK's reply type. Requests are posted with ``client.post`` (the SDK's documented way to
    send a request body as is) rather than ``chat.completions.create``, whose recursive transform of
    the (already plain) parameters took a third of the client's CPU: 3.1 instead of 4.8 ms per
    request, measured with benchmarks/bench_judge_throughput.py (2,000 requests at concurrency 32)."""
    from openai.types.chat import ChatCompletion

    return ChatCompletion


async def _counted(coro, counter) -> "Result":
    """Await one request and count it on the stage's progress."""
    result = await coro
    counter.advance(1, failed=int(result.error is not None))
    return result


class _Endpoint:
    """Settings shared by the chat and the embeddings clients."""

    def __init__(self, settings, section: str):
        self.section = section
        self.model = settings.model
        if not self.model:
            raise ConfigError(f"{section}.model: required (the model name the endpoint serves)")
        self.base_url = settings.base_url
        self.api_key_env = settings.api_key_env
        self.timeout_s = settings.timeout_s
        self.policy = calls.policy_of(settings)
        self.max_retries = self.policy.retries
        self.backoff_s = self.policy.backoff_s
        self.max_concurrency = settings.max_concurrency
        # every attempt of one item (a timeout retried once, backoffs, one repair): 2 x (2 requests + backoff)
        self.item_deadline_s = 2 * (2 * self.timeout_s + min(60.0, self.backoff_s * 2 ** self.max_retries))
        if self.api_key_env and not os.environ.get(self.api_key_env):
            raise ConfigError(f"{section}.api_key_env: the environment variable {self.api_key_env} is not set")
        cache_dir = settings.cache_dir
        self.cache = None
        if settings.cache:
            import diskcache

            path = Path(cache_dir or ragmem_home() / "judge-cache")
            path.mkdir(parents=True, exist_ok=True)
            self.cache = diskcache.Cache(str(path))
        self.usage = Usage()
        self.reasons: collections.Counter[str] = collections.Counter()
        self.asked_again = 0  # requests sent again because they had failed in an earlier run (rerun_note)
        self._sending: weakref.WeakSet = weakref.WeakSet()  # the requests sent, not yet answered (run_async)
        self.breaker = Breaker(f"{section}.base_url", self.base_url or OPENAI_URL)

    def _client(self):
        from openai import AsyncOpenAI

        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        # a local server (Ollama, vLLM) needs no key, but the SDK wants a string
        base_url, query = sdk_target(self.base_url)  # (a ?api_key= of the URL: every request's query)
        return AsyncOpenAI(base_url=base_url, api_key=key or "not-needed", default_query=query, timeout=self.timeout_s,
                           max_retries=0)

    def _failed(self, reason: str) -> Result:
        """An item that ended without a valid reply: counted, its reason kept for the summary."""
        self.usage.add(failures=1)
        with self.usage._lock:
            self.reasons[reason] += 1
        return Result(error=reason)

    def other_models(self) -> list[str]:
        """The models the replies named that are not ``model`` (:func:`ragmem.clients.replies.other_models`)."""
        return replies.other_models(self.model, self.usage.models)

    def model_note(self) -> str | None:
        """One line when the replies name another model than ``model`` (:func:`ragmem.clients.replies.model_note`)."""
        return replies.model_note(self.section, self.model, self.usage.models, getattr(self, "prices", None))

    def rerun_note(self) -> str | None:
        """One line when requests that failed in an earlier run were sent again (:func:`ragmem.clients.replies.rerun_note`)."""
        return replies.rerun_note(self.section, self.asked_again)

    def failure_summary(self) -> str | None:
        """One line when every request this client made failed (none was answered, cached ones
        aside): the shared reason, or the most common one. ``None`` otherwise."""
        failed = self.usage.failures
        if not failed or failed < self.usage.items - self.usage.cache_hits:
            return None
        reason, count = self.reasons.most_common(1)[0]
        if count == failed:
            return f"{self.section}: all {failed} requests failed the same way: {reason}"
        return f"{self.section}: all {failed} requests failed ({len(self.reasons)} reasons); most often ({count}): {reason}"

    def _keep(self, key: str, value: Any) -> None:
        """``value`` cached under ``key`` (a full disk: the home's reserve, :mod:`ragmem.runtime.space`)."""
        if (cache := self.cache) is not None:
            space.kept(lambda: cache.set(key, value), cache.directory)

    def _cached(self, key: str) -> Any:
        """The cached reply for ``key`` (counted as a hit), or None; every lookup counts one item."""
        self.usage.add(items=1)
        if self.cache is None:
            return None
        value = self.cache.get(key)
        if value is not None:
            self.usage.add(cache_hits=1)
        return value

    def _key(self, payload: dict[str, Any]) -> str:
        blob = json.dumps({"endpoint": self.base_url or "openai", "model": self.model,
                           "prompt_version": prompts.PROMPT_VERSION, **payload}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    async def _with_retries(self, call, most_usd: float = 0.0):
        """``call()`` under the one call policy (:mod:`ragmem.clients.calls`): retried on transient failures,
        every attempt taken from a sweep's budget (``calls.Allowance``, at ``most_usd``: what it could cost),
        counted and fed to the endpoint's breaker, which raises :class:`ragmem.clients.endpoints.EndpointDown`
        once it is open."""
        def spend() -> None:
            calls.Allowance.spend(self.section, most_usd)
            self.usage.add(calls=1)

        return await calls.call_async(call, self.policy, self.breaker, on_attempt=spend)

    def run_async(self, coros_factory) -> list[Result]:
        """Run ``coros_factory(client, semaphore) -> list[coroutine]`` to completion from sync code."""
        async def main():
            client = self._client()
            semaphore = asyncio.Semaphore(self.max_concurrency)
            self._format_lock = asyncio.Lock()  # asyncio locks belong to one event loop
            try:
                # an item only raises when the endpoint is down (EndpointDown): then the requests still
                # in flight are cancelled at once, and every task's outcome is retrieved (none is left
                # to asyncio's "exception was never retrieved" traceback at exit)
                tasks = [asyncio.ensure_future(c) for c in coros_factory(client, semaphore)]
                try:
                    await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
                except asyncio.CancelledError:  # Ctrl+C or SIGTERM: every request ends here, quietly
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
                    raise
                for task in tasks:
                    task.cancel()
                outcomes = await asyncio.gather(*tasks, return_exceptions=True)
                for outcome in outcomes:
                    if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
                        raise outcome
                return outcomes
            finally:
                await client.close()

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return calls.run_loop(main(), self._sending)  # stopped: the requests sent get their replies
        box: dict[str, Any] = {}  # called from inside a running loop: use a thread of our own
        thread = threading.Thread(target=lambda: box.setdefault("r", calls.run_loop(main(), self._sending)))
        thread.start()
        thread.join()
        return box["r"]

    def signature(self) -> str:
        return f"{self.section}:{self.model}@{self.base_url or 'openai'}"


class JudgeClient(_Endpoint):
    """Chat completions that must return a JSON object of a given kind: a built-in task of
    :mod:`ragmem.prompts.templates`, or the scores of the config's rubrics (task ``rubric:NAME``, or
    ``rubric:A+B`` for a batch; :mod:`ragmem.prompts.rubrics`)."""

    def __init__(self, settings: JudgeSettings | dict[str, Any], rubrics: Sequence[rubric_prompts.Rubric] = ()):
        settings = as_section(JudgeSettings, settings, "judge")
        super().__init__(settings, "judge")
        self.rubrics = {r.name: r for r in rubrics}
        self.temperature = settings.temperature
        self.seed = settings.seed
        mode = settings.response_format
        self.mode: str = "json_schema" if mode == "auto" else mode
        self.fallback = mode == "auto"
        self.prices = settings.prices
        self.max_tokens = settings.max_tokens
        self.samples = settings.samples
        self.prompt_variant = settings.prompt_variant
        self._format_lock: asyncio.Lock | None = None  # per event loop: see run_async
        self._contracts: dict[str, Contract] = {}

    def contract(self, task: str) -> Contract:
        """What a request of ``task`` is and must be answered with (ragmem.prompts.contracts), made once."""
        found = self._contracts.get(task)
        if found is None:  # (two threads may both make it: the same contract, either kept)
            found = self._contracts[task] = contract_of(task, self.rubrics, self.prompt_variant)
        return found

    def reply_limit(self, task: str, fields: dict[str, str]) -> int:
        """``max_tokens`` for one request, at most ``judge.max_tokens``. A verdict, a question or a
        question with its answer is a sentence or two: at most ``SHORT_REPLY_TOKENS``; a rubric's
        score and reason, that per rubric. A list (entities of a text, claims of an answer) cannot be
        longer than what it lists from, written out with quotes and commas: 64 tokens plus 4 per
        token of that text (estimated by :func:`ragmem.prompts.templates.estimate_tokens`). A small model
        that runs on then holds a server slot for seconds, not for minutes."""
        if task.startswith(rubric_prompts.TASK_PREFIX):  # a score and a reason per rubric
            return min(self.max_tokens, SHORT_REPLY_TOKENS * len(rubric_prompts.names_of(task)))
        source = self.contract(task).listing
        if source is None:
            return min(self.max_tokens, SHORT_REPLY_TOKENS)
        return min(self.max_tokens, 64 + 4 * prompts.estimate_tokens(fields.get(source, "")))

    def rubrics_of(self, task: str) -> list[rubric_prompts.Rubric] | None:
        """The rubrics a ``rubric:...`` task scores; ``None`` for a built-in task."""
        if not task.startswith(rubric_prompts.TASK_PREFIX):
            return None
        return [self.rubrics[name] for name in rubric_prompts.names_of(task)]

    def _format(self, task: str) -> dict[str, Any] | None:
        if self.mode == "json_schema":
            contract = self.contract(task)
            return {"type": "json_schema", "json_schema": {"name": contract.kind, "schema": contract.schema,
                                                           "strict": True}}
        if self.mode == "json_object":
            return {"type": "json_object"}
        return None

    def _cost(self, tokens_in: int, tokens_out: int) -> float:
        price = self.prices.get(self.model)
        if price is None:
            return 0.0  # no price configured for this model: its cost is not counted
        return price.usd(tokens_in, tokens_out)

    async def _complete(self, client, messages, task, limit, seed) -> tuple[str | None, str | None]:
        """The reply's content and finish reason. The response format is decided once per endpoint
        and model: the first HTTP 400 that rejects the current format moves to the next one under a
        lock; requests that were rejected concurrently wait for that decision and retry with it."""
        while True:
            mode = self.mode
            fmt = self._format(task)
            kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                                      "max_tokens": limit}
            if seed is not None:
                kwargs["seed"] = seed
            if fmt is not None:
                kwargs["response_format"] = fmt
            most = calls.most_usd(messages, limit, self.prices.get(self.model))  # (a dollar budget's reservation)
            try:
                reply = await self._with_retries(lambda: calls.json_reply(
                    lambda: client.post("/chat/completions", body=kwargs, cast_to=_completion())), most)  # noqa: B023
            except Exception as exc:
                if self.fallback and fmt is not None and calls.rejects_format(exc):
                    async with self._format_lock or asyncio.Lock():  # (made by run_async, before any request)
                        if self.mode == mode:  # the first to be rejected decides; the others just retry
                            self.mode = RESPONSE_MODES[RESPONSE_MODES.index(mode) + 1]
                    continue
                raise
            self.usage.saw(getattr(reply, "model", None))
            usage = getattr(reply, "usage", None)
            tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
            tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
            self.usage.add(tokens_in=tokens_in, tokens_out=tokens_out, cost_usd=self._cost(tokens_in, tokens_out))
            calls.Allowance.settle(self.section, most, self._cost(tokens_in, tokens_out))
            choices = getattr(reply, "choices", None) or []
            if not choices:
                return None, None
            return choices[0].message.content, getattr(choices[0], "finish_reason", None)

    def _problem(self, task: str, content: str | None, finish: str | None, limit: int) -> tuple[Any, str | None]:
        if finish == "length":
            return None, f"reply cut off at {limit} tokens (judge.max_tokens {self.max_tokens})"
        value, problem = parse_json(content)
        if problem:
            return value, problem
        return value, self.contract(task).validate(value)

    def _repair(self, task: str, problem: str) -> dict[str, str]:
        contract = self.contract(task)
        return prompts.repair_message(contract.kind, problem, contract.shape)

    def samples_of(self, task: str) -> int:
        """How many times a request of ``task`` is asked: ``judge.samples`` for a verdict or a rubric's
        score, else once (a list of claims or entities, a question: there is no majority of those)."""
        return self.samples if self.contract(task).sampled else 1

    def seed_of(self, sample: int) -> int | None:
        """The seed sent with sample ``sample`` (0, 1, ...): ``judge.seed + sample``, so that the
        samples of a seeded endpoint can differ; none when ``judge.seed`` is null."""
        return None if self.seed is None else self.seed + sample

    def request(self, task: str, fields: dict[str, str], sample: int = 0) -> tuple[list[dict[str, str]], str]:
        """The messages of one request and its cache key (also used by ``ragmem run --dry-run``).
        Every sample has its own key; sample 0's is the key of a run with one sample, so raising
        ``judge.samples`` pays only for the new samples."""
        contract = self.contract(task)
        messages = contract.messages(fields)
        payload = {"task": task, "messages": messages, "temperature": self.temperature, "seed": self.seed_of(sample)}
        if contract.version is not None:  # (a rubric's text, a generation prompt: its version is said as well)
            payload["rubrics" if contract.kind == "rubric" else "generation"] = contract.version
        return messages, self._key(payload if sample == 0 else {**payload, "sample": sample})

    async def _ask(self, client, semaphore, task: str, fields: dict[str, str], sample: int = 0) -> Result:
        messages, key = self.request(task, fields, sample)
        cached = self._cached(key)
        if cached is not None:
            return Result(cached)
        failed_before = self.cache is not None and self.cache.get(f"failed:{key}") is not None
        if failed_before:
            with self.usage._lock:
                self.asked_again += 1
        result = await self._asked(client, semaphore, task, messages, key, fields, sample)
        if self.cache is not None and result.error is not None:  # marked, never used as a reply
            self._keep(f"failed:{key}", result.error)
        elif failed_before and self.cache is not None:
            self.cache.delete(f"failed:{key}")
        return result

    async def _asked(self, client, semaphore, task: str, messages, key: str, fields: dict[str, str], sample: int) -> Result:
        async with semaphore:
            self._sending.add(asyncio.current_task())  # sent: on a stop, its reply is waited for (calls.run_loop)
            try:  # every attempt of the item (retries and the repair included) within its deadline
                value, problem = await asyncio.wait_for(
                    self._attempts(client, messages, task, self.reply_limit(task, fields), self.seed_of(sample)),
                    self.item_deadline_s)
                if problem:
                    return self._failed(f"invalid reply after one repair: {problem}")
            except EndpointDown:
                raise
            except asyncio.TimeoutError:
                return self._failed(f"no valid reply within the item deadline ({self.item_deadline_s:g} s)")
            except Exception as exc:
                return self._failed(_describe(exc))
        if self.cache is not None:
            self._keep(key, value)
        return Result(value)

    async def _attempts(self, client, messages, task, limit, seed) -> tuple[Any, str | None]:
        content, finish = await self._complete(client, messages, task, limit, seed)
        value, problem = self._problem(task, content, finish, limit)
        if problem:  # one repair attempt
            repaired = messages + [{"role": "assistant", "content": content or ""}, self._repair(task, problem)]
            content, finish = await self._complete(client, repaired, task, limit, seed)
            value, problem = self._problem(task, content, finish, limit)
        return value, problem

    def run(self, requests: Sequence[tuple[str, dict[str, str]]]) -> list[Result]:
        """``[(task, fields), ...]`` -> one Result per request, in order; a verdict is asked
        ``judge.samples`` times and its samples combined (:func:`combine`)."""
        if not requests:
            return []
        asked = [(i, t, f, k) for i, (t, f) in enumerate(requests) for k in range(self.samples_of(t))]
        sent, answer = replies.distinct([(t, json.dumps(f, sort_keys=True, default=str), k) for _, t, f, k in asked])
        name = "llm " + ", ".join(sorted({t for t, _ in requests}))  # (identical requests of a batch: sent once)
        with progress.stage(name, len(sent)) as counter:
            got = self.run_async(lambda client, sem: [_counted(self._ask(client, sem, *asked[n][1:]), counter)
                                                      for n in sent])
        per_request = itertools.groupby(zip(asked, (got[a] for a in answer)), key=lambda pair: pair[0][0])  # (in order)
        return [self.combine(task, [r for _, r in samples]) for (task, _), (_, samples) in zip(requests, per_request)]

    def combine(self, task: str, samples: Sequence[Result]) -> Result:
        """One result from a request's ``judge.samples`` samples: a verdict's majority
        (:func:`ragmem.clients.replies.combine`), a rubric's mean score (:func:`ragmem.clients.replies.combine_scores`)."""
        rubrics = self.rubrics_of(task)
        return combine_scores(rubrics, samples) if rubrics else combine(samples)

    def signature(self) -> str:
        return (f"judge:llm|model:{self.model}|endpoint:{self.base_url or 'openai'}|prompts:{prompts.PROMPT_VERSION}"
                f"#{prompts.prompt_hash()}|temp:{self.temperature}|seed:{self.seed}"
                + (f"|samples:{self.samples}" if self.samples > 1 else "")
                + (f"|variant:{self.prompt_variant}" if self.prompt_variant != "default" else "")
                + (f"|rubrics:{','.join(f'{n}#{r.version}' for n, r in sorted(self.rubrics.items()))}" if self.rubrics else ""))


class EmbeddingClient(_Endpoint):
    """Embeddings of texts, cached per (endpoint, model, text)."""

    def __init__(self, settings: EmbeddingSettings | dict[str, Any]):
        super().__init__(as_section(EmbeddingSettings, settings, "embeddings"), "embeddings")

    def text_key(self, text: str) -> str:
        return self._key({"embed": text})

    async def _embed_one(self, client, semaphore, text: str) -> Result:
        key = self.text_key(text)
        cached = self._cached(key)
        if cached is not None:
            return Result(cached)
        async with semaphore:
            try:
                reply = await self._with_retries(lambda: calls.json_reply(
                    lambda: client.embeddings.create(model=self.model, input=[text])))
                vector = [float(x) for x in reply.data[0].embedding]
                self.usage.saw(getattr(reply, "model", None))
                usage = getattr(reply, "usage", None)
                self.usage.add(tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0))
            except EndpointDown:
                raise
            except Exception as exc:
                return self._failed(_describe(exc))
        if self.cache is not None:
            self._keep(key, vector)
        return Result(vector)

    def embed(self, texts: Sequence[str]) -> list[Result]:
        unique = list(dict.fromkeys(texts))
        if not unique:
            return []
        with progress.stage("embeddings", len(unique)) as counter:
            results = self.run_async(lambda client, sem: [_counted(self._embed_one(client, sem, t), counter)
                                                          for t in unique])
        by_text = dict(zip(unique, results))
        return [by_text[t] for t in texts]
