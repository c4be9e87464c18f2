"""Answer generators: an offline extractive answerer (default) or an OpenAI-compatible chat model."""

from __future__ import annotations

import os
import re
import threading
from typing import Sequence

from ragmem.clients import calls
from ragmem.clients.endpoints import Breaker, OPENAI_URL, sdk_target
from ragmem.config.loading import as_section
from ragmem.config.settings import GeneratorSettings
from ragmem.prompts.templates import numbered
from ragmem.text.keywords import KeywordExtractor

_SENTENCES = re.compile(r"[^。！？!?.]+(?:[。！？!?]|\.(?=\s|$))?")


class ExtractiveGenerator:
    """Answers with the context sentence that shares the largest share of the query's keywords.

    ``score(s) = |K(query) ∩ K(s)| / |K(query)|``; ties go to the earlier context (better ranked),
    then the earlier sentence. With no keyword in common it answers the first sentence of the first
    context, and with no context at all it says it does not know.
    """

    name = "extractive"

    def __init__(self, keywords: KeywordExtractor):
        self.keywords = keywords

    def __call__(self, query: str, contexts: Sequence[str]) -> str:
        q = self.keywords(query)
        best, best_score = None, -1.0
        for text in contexts:
            for match in _SENTENCES.finditer(text):
                sentence = match.group().strip()
                if not sentence:
                    continue
                score = len(q & self.keywords(sentence)) / len(q) if q else 0.0
                if score > best_score:
                    best, best_score = sentence, score
        return best if best is not None else "I don't know."


class ChatGenerator:
    """An OpenAI-compatible chat model answering from the numbered contexts."""

    name = "openai"
    SYSTEM = ("Answer the question using only the numbered context passages. Answer in the language of "
              "the question, in one or two sentences. If the passages do not contain the answer, say so.")

    def __init__(self, settings):
        from openai import OpenAI  # slow import (openai): only an openai generator

        key_env = settings.api_key_env or "OPENAI_API_KEY"
        self.model = settings.model
        self.temperature = settings.temperature
        self.max_tokens = settings.max_tokens
        # the SDK's own retries are off: the one call policy retries, and feeds the breaker
        base_url, query = sdk_target(settings.base_url)  # (a ?api_key= of the URL: every request's query)
        self.client = OpenAI(base_url=base_url, api_key=os.environ.get(key_env) or "not-needed", default_query=query,
                             timeout=settings.timeout_s, max_retries=0)
        self.policy = calls.policy_of(settings)
        self.breaker = Breaker("generator.base_url", settings.base_url or OPENAI_URL)
        self.tokens = {"generator_calls": 0, "generator_tokens_in": 0, "generator_tokens_out": 0}
        self._lock = threading.Lock()

    def usage(self) -> dict[str, float]:
        """Requests and tokens so far (as the endpoint reported them), for a method's cost."""
        with self._lock:
            return {k: float(v) for k, v in self.tokens.items()}

    def __call__(self, query: str, contexts: Sequence[str]) -> str:
        passages = numbered(contexts) or "(no passages)"
        messages = [{"role": "system", "content": self.SYSTEM},
                    {"role": "user", "content": f"<passages>\n{passages}\n</passages>\n<question>{query}</question>"}]
        reply = calls.call(lambda: self.client.chat.completions.create(
            model=self.model, temperature=self.temperature, max_tokens=self.max_tokens, messages=messages),
            self.policy, self.breaker)
        usage = getattr(reply, "usage", None)
        with self._lock:
            self.tokens["generator_calls"] += 1
            self.tokens["generator_tokens_in"] += int(getattr(usage, "prompt_tokens", 0) or 0)
            self.tokens["generator_tokens_out"] += int(getattr(usage, "completion_tokens", 0) or 0)
        return (reply.choices[0].message.content or "").strip()


def build_generator(settings, keywords: KeywordExtractor):
    """The generator named by ``generator.type`` (:class:`ragmem.config.settings.GeneratorSettings`, or a
    dict of them)."""
    settings = as_section(GeneratorSettings, settings, "generator")
    if settings.type == "extractive":
        return ExtractiveGenerator(keywords)
    return ChatGenerator(settings)
