"""The LLM judge: answer correctness decided by a model behind any OpenAI-compatible endpoint.

Against the reference answer; an example without one (production traffic) is judged on its
contexts instead: correct and supported by them (``answer_supported``, the reference-free verdict).

A reply that never meets the contract (after retries and one repair) leaves the item unjudged
(``verdict=None``) with the reason; the keyword verdict is kept beside it for agreement figures.
With ``judge.samples`` N > 1 the verdict is the majority of N samples (their votes kept); a tie
leaves the item undecided (``judge_error`` 'undecided: ...').
"""

from __future__ import annotations

from ragmem.judges.base import JudgeItem, Judgement
from ragmem.prompts.templates import numbered, said_yes
from ragmem.judges.keyword import KeywordJudge


class LLMJudge:
    name = "llm"
    #: an item without a reference answer is judged on its contexts: correct and supported by them
    #: (``answer_supported``); one with neither is not asked (:func:`ragmem.run.pipeline.judge`)
    reference_free = True

    def __init__(self, client, keyword: KeywordJudge):
        self.client, self.keyword = client, keyword

    def judge(self, items: list[JudgeItem]) -> list[Judgement]:
        offline = self.keyword.judge(items)
        results = self.client.run([_request(i) for i in items])
        out = []
        for result, kw in zip(results, offline):
            if result.error:  # failed, or undecided (a tie of judge.samples)
                out.append(Judgement(None, kw.score, error=result.error, keyword_verdict=kw.verdict, votes=result.votes))
            else:
                verdict = int(said_yes(result.value))
                out.append(Judgement(verdict, kw.score, reason=result.value.get("reason"), keyword_verdict=kw.verdict,
                                     votes=result.votes))
        return out

    def signature(self) -> str:
        return self.client.signature()


def _request(item: JudgeItem) -> tuple[str, dict[str, str]]:
    """Against the reference answer when the item has one, else against its contexts."""
    if item.reference_answer.strip():
        return "answer_correctness", {"question": item.query, "reference": item.reference_answer,
                                      "answer": item.generated_answer}
    contexts = numbered(item.contexts)
    return "answer_supported", {"question": item.query, "contexts": contexts, "answer": item.generated_answer}
