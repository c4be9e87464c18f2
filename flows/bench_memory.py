"""The memory benchmark flow: for every memory layer, ingest each conversation, answer its
questions, judge, score; one MLflow child run per layer under one parent, results table on the parent."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pandas as pd
from prefect import flow
from prefect.runtime import flow_run
from prefect.utilities.annotations import quote

from ragmem import memory_bench
from ragmem.config import RunConfig
from ragmem.errors import ConfigError
from ragmem.judges import build_judge
from ragmem.locomo import CATEGORIES, questions
from ragmem.metrics.generation import scorer_for
from ragmem.reference.generator import build_generator
from ragmem.text.keywords import KeywordExtractor
from ragmem.tracking import Tracker
from tasks.memory import judge_answers, load_conversations, memory_conversation

log = logging.getLogger("ragmem")


def method_specs(methods: list[Any]) -> list[dict[str, Any]]:
    specs = []
    for i, method in enumerate(methods):
        spec = {"name": method, "type": method} if isinstance(method, str) else dict(method or {})
        spec.setdefault("type", spec.get("name"))
        spec.setdefault("name", spec.get("type"))
        if spec["type"] not in memory_bench.METHOD_TYPES:
            raise ConfigError(f"bench.methods[{i}]: unknown memory layer {spec['type']!r}; "
                              f"available: {', '.join(memory_bench.METHOD_TYPES)}")
        specs.append(spec)
    if len({s["name"] for s in specs}) != len(specs):
        raise ConfigError("bench.methods: method names must differ")
    return specs


@flow(name="ragmem-bench-memory", validate_parameters=False,
      flow_run_name=lambda: flow_run.parameters["config"].get("run_name") or f"bench-memory-{uuid.uuid4().hex[:6]}")
def bench_memory_flow(config: dict[str, Any]) -> dict[str, Any]:
    """Memory layers compared on LoCoMo-style conversations (see ragmem.memory_bench)."""
    cfg = RunConfig.from_dict(config)
    bench = config["bench"]
    specs = method_specs(bench["methods"])
    conversations = load_conversations(str(bench["data"]))[: bench.get("limit_conversations") or None]
    selected = {c.id: questions(c, bench["include_adversarial"], bench.get("limit_questions")) for c in conversations}
    n_questions = sum(len(q) for q in selected.values())
    log.info("bench-memory: %d conversations, %d questions, %d methods", len(conversations), n_questions, len(specs))

    keywords = KeywordExtractor(cfg.tokenizer, cfg.stopwords)
    scorer = scorer_for(cfg.raw["generation"]["tokenizer"], cfg.raw["generation"]["bleu_tokenize"])
    count_tokens = lambda text: len(scorer.tokens(text))  # noqa: E731
    generate = build_generator(cfg.raw["generator"], keywords)
    client = None
    if cfg.judge.get("type") == "llm":
        from ragmem.llm import JudgeClient

        client = JudgeClient(cfg.judge)
    judge = build_judge(cfg.judge, keywords, cfg.zero_division, client)

    tracker = Tracker(cfg.tracking_uri, cfg.artifact_root)
    parent = tracker.start_run(cfg.experiment, cfg.run_name or "bench-memory",
                               tags={"ragmem.entry": "bench-memory", "prefect.flow_run_id": str(flow_run.id)})
    common = {"bench.data": str(bench["data"]), "bench.top_k": str(bench["top_k"]),
              "bench.include_adversarial": str(bench["include_adversarial"]),
              "n_conversations": str(len(conversations)), "n_questions": str(n_questions),
              "bench.limit_questions": str(bench.get("limit_questions")), "generator.type": cfg.raw["generator"]["type"],
              "judge.signature": judge.signature(), "generation.signature": scorer.signature()}
    tracker.log_params(parent, {**common, "bench.methods": [s["name"] for s in specs]})
    categories = sorted({q.category for qs in selected.values() for q in qs})
    results, summary_methods = {}, []
    try:
        for spec in specs:
            child = tracker.start_run(cfg.experiment, spec["name"], parent_run_id=parent,
                                      tags={"ragmem.entry": "bench-memory-method", "bench.method": spec["name"]})
            try:
                layer = memory_bench.build_layer(spec, keywords, count_tokens, int(bench["full_context_tokens"]))
                answered, add_times = [], []
                for conversation in conversations:
                    done, adds = memory_conversation(spec["name"], quote(layer), quote(conversation),
                                                     quote(selected[conversation.id]), int(bench["top_k"]), quote(generate))
                    answered += done
                    add_times += adds
                    log.info("bench-memory: %s: conversation %s done (%d questions)", spec["name"], conversation.id, len(done))
                verdicts = judge_answers(spec["name"], quote(judge), quote(answered))
                rows, metrics = memory_bench.score(answered, add_times, scorer, verdicts, count_tokens)
                if client is not None:
                    metrics.update(client.usage.as_metrics("judge"))
                tracker.log_params(child, {**common, "bench.method": spec["name"], "bench.method_type": spec["type"],
                                           "bench.method_spec": {k: v for k, v in spec.items() if k != "params"}})
                tracker.log_metrics(child, metrics)
                tracker.log_table(child, pd.DataFrame(rows), "questions")
                tracker.finish(child)
            except BaseException as exc:
                tracker.set_tags(child, {"ragmem.error": f"{type(exc).__name__}: {exc}"[:5000]})
                tracker.finish(child, "FAILED")
                raise
            results[spec["name"]] = metrics
            summary_methods.append({"method": spec["name"], "run_id": child, "metrics": metrics})
        table = memory_bench.results_table(results, categories)
        tracker.log_table(parent, pd.DataFrame(table), "locomo_results")
        tracker.finish(parent)
    except BaseException:
        tracker.finish(parent, "FAILED")
        raise
    return {"parent_run_id": parent, "experiment": cfg.experiment, "n_conversations": len(conversations),
            "n_questions": n_questions, "categories": {c: CATEGORIES[c] for c in categories},
            "methods": summary_methods, "results_table": table}
