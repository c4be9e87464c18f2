"""The defaults of the settings the metric families read (``generation.*``, ``rag_metrics.*``),
for a :class:`ragmem.metrics.base.MetricContext` made without a config (tests, notebooks).

The settings schema (:mod:`ragmem.config.settings`) takes its defaults from these, so they are written once;
the families never import the schema. A leaf: no pandas, no numpy.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GenerationOptions:
    tokenizer: str = "rjieba"     # tokens of bleu_1, ROUGE, token_f1, exact_match
    bleu_tokenize: str = "zh"     # sacrebleu tokenizer of bleu


@dataclass(frozen=True)
class RagOptions:
    threshold: float = 0.5                          # pass threshold of {metric}_pass_rate
    contextual_precision_top_k: int | None = None   # chunks judged per example (None: all)
    relevancy_questions: int = 3                    # questions generated per answer
    relevancy: str = "auto"                         # answer_relevancy with an LLM: auto | questions | statements


#: judge.min_kappa's default: the judge is flagged unreliable when the upper end of its kappa interval
#: with the labels is below it (:func:`ragmem.metrics.reliability.unreliable`)
DEFAULT_MIN_KAPPA = 0.4
