"""The LLM judge: answer correctness decided by a model behind any OpenAI-compatible endpoint.

A reply that never meets the contract (after retries and one repair) leaves the item unjudged
(``verdict=None``) with the reason; the keyword verdict is kept beside it for agreement figures.
With ``judge.samples`` N > 1 the verdict is the majority of N samples (their votes kept); a tie
leaves the item undecided (``judge_error`` 'undecided: ...').
"""

from __future__ import annotations

from ragmem.judges.base import JudgeItem, Judgement
from ragmem.judges.keyword import KeywordJudge


class LLMJudge:
    name = "llm"

    def __init__(self, client, keyword: KeywordJudge):
        self.client, self.keyword = client, keyword

    def judge(self, items: list[JudgeItem]) -> list[Judgement]:
        offline = self.keyword.judge(items)
        results = self.client.run([("answer_correctness", {"question": i.query, "reference": i.reference_answer,
                                                           "answer": i.generated_answer}) for i in items])
        out = []
        for result, kw in zip(results, offline):
            if result.error:  # failed, or undecided (a tie of judge.samples)
                out.append(Judgement(None, kw.score, error=result.error, keyword_verdict=kw.verdict, votes=result.votes))
            else:
                verdict = 1 if result.value["verdict"].strip().lower() == "yes" else 0
                out.append(Judgement(verdict, kw.score, reason=result.value.get("reason"), keyword_verdict=kw.verdict,
                                     votes=result.votes))
        return out

    def signature(self) -> str:
        return self.client.signature()
