"""What a run records about itself: its params (settings flattened, secrets masked), its counts,
the summary JSON and where it was stored. Written by :mod:`ragmem.run.engine` once the metrics are in."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ragmem.config.loading import RunConfig
from ragmem.config.settings import REFERENCE_ONLY
from ragmem.config.secrets import mask, scrub, scrub_all
from ragmem.data.loaders import Dataset
from ragmem.errors import ConfigError
from ragmem.metrics import MetricResult, relevancy, scored
from ragmem.metrics.generation import scorer_for
from ragmem.metrics.rag import OfflineEntities
from ragmem.metrics.reliability import unreliable
from ragmem.prompts import templates as prompts
from ragmem.schema import LABEL_SET_ASIDE
from ragmem.version import __version__

if TYPE_CHECKING:
    from ragmem.run.pipeline import Components

def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists and free-form mappings (``agent.params``) stay whole."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value and dotted != "agent.params":
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


#: the longest param value MLflow keeps (mlflow.utils.validation.MAX_PARAM_VAL_LENGTH)
MAX_PARAM_CHARS = 6000


def check_param_sizes(cfg: RunConfig) -> None:
    """Every setting a tracked run logs as an MLflow param fits MLflow's limit, checked before any
    work (MLflow refuses a longer one only when the run logs it, after every paid call): a
    ConfigError naming the setting otherwise."""
    if not cfg.tracking.enabled:
        return
    for key, value in flatten(cfg.raw).items():
        if isinstance(value, str) and len(value) <= MAX_PARAM_CHARS:
            continue  # (the common case, without writing the value out)
        if _is_param(key, value, cfg) and len(_param_text(key, value)) > MAX_PARAM_CHARS:
            raise ConfigError(f"{key}: {len(_param_text(key, value)):,} characters as an MLflow param, which keeps "
                              f"at most {MAX_PARAM_CHARS:,} (pass a long value as a file the agent reads, or set "
                              f"tracking.enabled: false)")


def _param_text(key: str, value: Any) -> str:
    value = mask(value, key)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


_NOT_PARAMS = ("data.files", "metrics", "ranking.k", "experiment", "run_name", "tracking.uri", "tracking.enabled",
               "tracking.artifact_root", "import_paths")


def _is_param(key: str, value: Any, cfg: RunConfig) -> bool:
    """A setting that is set and that this run used: no ``null`` and no empty value, no section of the
    reference agent unless it ran, no ``data.traces`` unless the traces are the data, no embeddings
    endpoint unless one is configured; the experiment, run name and tracking settings are MLflow's
    own fields, not params."""
    if value is None or value == [] or value == {} or key in _NOT_PARAMS or key.startswith(("sweep", "bench", "rubrics.")):
        return False
    if key.split(".", 1)[0] in REFERENCE_ONLY:
        return cfg.agent.type == "reference"
    if key.startswith("data.traces."):  # production traces: their settings only when they are the data
        return cfg.data.traces.given
    if key.startswith("embeddings."):
        return bool(cfg.embeddings.model)
    if key.startswith(("judge.", "rag_metrics.")) and not cfg.judge.model:  # no LLM: its settings did nothing
        return key in ("judge.type", "judge.threshold", "judge.min_kappa", "judge.label_sample")
    if key.startswith("agent.") and cfg.agent.type == "replay":  # answers read from the data
        return key == "agent.type"
    return True


def run_params(cfg: RunConfig, dataset: Dataset, components: Components) -> dict[str, str]:
    """Everything that produced the numbers, as MLflow params (strings), each under its section's
    dotted prefix: every setting that is set (:func:`_is_param`), plus data identity, signatures and
    versions. Secret-looking values are masked. (The git commit is the tag
    ``mlflow.source.git.commit``, see :mod:`ragmem.tracking.record`.)"""
    params = {key: _param_text(key, value) for key, value in flatten(cfg.raw).items() if _is_param(key, value, cfg)}
    return scrub_all(params | {  # (a signature that names a URL: its secrets masked by value)
        "data.path": ";".join(str(f.path) for f in dataset.files),
        "data.labels": ";".join("-" if f.label is None else str(f.label) for f in dataset.files),
        "data.sha256": dataset.sha256,
        "data.n_examples": str(len(dataset)),
        "judge.signature": components.judge.signature(),
        "judge.prompt_version": prompts.PROMPT_VERSION,
        "judge.prompt_hash": prompts.prompt_hash(),
        "ranking.signature": f"k:{','.join(map(str, cfg.ks))}|rel:{cfg.ranking.relevance}|kw_thr:{cfg.ranking.keyword_threshold}"
                             f"|dup:first|no_rel:excluded",
        "generation.signature": generation_signature(cfg),
        "stats.signature": f"bootstrap:{cfg.stats.resamples}|conf:{cfg.stats.confidence}"
                           f"|seed:{cfg.seed}|method:{cfg.stats.bootstrap}"
                           + (f"|cluster:{cfg.stats.cluster_by}" if cfg.stats.cluster_by else ""),
        "keywords.stopwords": components.keywords.stopword_signature(),
        "keywords.signature": components.keywords.signature(),
        "metrics": ",".join(cfg.metrics.names),
        "ranking.k": ",".join(map(str, cfg.ks)),
        "ragmem.version": __version__,
    } | ({"judge.response_format_used": components.llm.mode} if components.llm is not None else {})
      | _entity_param(cfg, components) | _relevancy_param(cfg) | rubric_params(cfg) | custom_params(components))


def custom_params(components: Components) -> dict[str, str]:
    """Each metric of one's own as one param ``metrics.custom.<name>``: its target, its source's hash and
    what it reads (:attr:`ragmem.metrics.custom.CustomMetric.signature`)."""
    return {f"metrics.custom.{m.name}": m.signature for m in components.custom}


def rubric_params(cfg: RunConfig) -> dict[str, str]:
    """Each rubric as one param ``rubrics.<name>``: its scale, inputs, steps and examples counted,
    and its prompt version (the hash of its whole text, which is in the run's config.json)."""
    return {f"rubrics.{r.name}": f"scale:{r.scale}|inputs:{','.join(r.inputs)}|steps:{len(r.steps)}"
                                 f"|examples:{len(r.examples)}|prompt:{r.prompt_version}"
            for r in cfg.rubric_definitions()}


def _entity_param(cfg: RunConfig, components: Components) -> dict[str, str]:
    """How offline context_entity_recall finds entities (the tagger follows keywords.tokenizer)."""
    if components.llm is not None or "context_entity_recall" not in [*cfg.metrics.names, *cfg.gates]:
        return {}

    keywords = components.keywords
    return {"rag_metrics.entities": OfflineEntities(keywords.stopwords, keywords.tokenizer).signature()}


def _relevancy_param(cfg: RunConfig) -> dict[str, str]:
    """How answer_relevancy was scored (:func:`ragmem.metrics.relevancy.signature`), when it was."""
    if "answer_relevancy" not in [*cfg.metrics.names, *cfg.gates]:
        return {}
    rag = cfg.rag_metrics
    return {"rag_metrics.relevancy.signature": relevancy.signature(
        cfg.judge.asks_llm, cfg.embeddings.model, rag.relevancy, rag.relevancy_questions)}


def generation_signature(cfg: RunConfig) -> str:
    return scorer_for(cfg.generation.tokenizer, cfg.generation.bleu_tokenize).signature()


def counts(table: pd.DataFrame, result: MetricResult) -> dict[str, int]:
    """How many examples each kind of trouble touched (logged as metrics, shown in the summary)."""
    return {**table_counts(table), **{f"undefined_{k}": int(v) for k, v in result.undefined.items()}}


def table_counts(table: pd.DataFrame) -> dict[str, int]:
    """:func:`counts` of the table's rows (a streamed run adds its chunks')."""
    return {
        "n_examples": int(len(table)),
        "n_agent_errors": int(table["error"].notna().sum()),
        "n_judge_errors": int(table["judge_error"].notna().sum()),
        "n_unlabelled": int(table["label"].isna().sum()),
        "n_errors": int((table["error"].notna() | table["judge_error"].notna()).sum()),
        # labels that judged another answer than the agent gave (ragmem.run.pipeline.bound_label)
        **({"n_labels_set_aside": int(table[LABEL_SET_ASIDE].notna().sum())} if LABEL_SET_ASIDE in table else {}),
    }


def clean_number(value: float | None) -> float | None:
    """JSON has no NaN: a missing or NaN value is ``null``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


def summary(run_id: str | None, cfg: RunConfig, result: MetricResult, table: pd.DataFrame,
            params: dict[str, str], run_counts: dict[str, int] | None = None,
            run_coverage: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The summary JSON contract: run_id, experiment, n_examples, n_errors, metrics, ci, params, counts,
    coverage, partial, notes, clusters, judge_unreliable, tracking_uri. ``run_counts`` and ``run_coverage``: a
    streamed run's, its chunks' added up."""
    c = counts(table, result) if run_counts is None else run_counts
    defined = [name for name, value in result.values.items() if clean_number(value) is not None]
    reached = (scored.chunk_coverage(table, defined) if run_coverage is None
               else {k: v for k, v in run_coverage.items() if k in defined})
    return scrub_all({  # every text of it, as every copy of it is written (artifact, --output, report.html)
        "run_id": run_id,
        "experiment": cfg.experiment,
        "n_examples": c["n_examples"],
        "n_errors": c["n_errors"],
        "metrics": {k: clean_number(v) for k, v in result.values.items()},
        "ci": {k: list(v) for k, v in result.ci.items() if v is not None},
        "params": params,
        "counts": c,
        # how many examples each score rests on, of how many it could have; below report.min_coverage: why
        "coverage": {name: {"scored": v["scored"], "of": v["of"]} for name, v in reached.items()},
        "partial": scored.partial(reached, cfg.report.min_coverage),
        "notes": [str(note) for note in result.notes] + ([cfg._chosen] if getattr(cfg, "_chosen", None) else [])
        + failed_traces(table, c.get("n_agent_errors", 0)),
        # stats.cluster_by: the unit the intervals resample, how many, the method, the design effects; else null
        "clusters": result.clusters,
        # gates.stop_when_decided: after how many examples of how many the gates were decided, each one's interval
        **({"decided": result.decided} if result.decided else {}),
        # one line when the judge agrees with the labels no better than chance (judge.min_kappa), else null
        "judge_unreliable": unreliable(result.values, result.ci, cfg.judge.min_kappa),
        # where the run is stored (a database file by its absolute path; a URL's secrets masked); null untracked
        "tracking_uri": store_location(cfg.tracking_uri) if run_id else None,
    })


def failed_traces(table: pd.DataFrame, n_failed: int, shown: int = 5) -> list[str]:
    """A note naming the application traces (``data.traces``) that failed, by trace id with the reason:
    the first ``shown`` of them (the per-example table's ``error`` column has every one)."""
    if "trace_id" not in table.columns or not n_failed:
        return []
    failed = table[table["error"].notna()]
    named = "; ".join(f"{t}: {e}" for t, e in zip(failed["trace_id"][:shown], failed["error"][:shown]))
    more = f"; and {n_failed - min(shown, len(failed))} more (the error column of the per-example table)" \
        if n_failed > min(shown, len(failed)) else ""
    return [f"{n_failed} traces failed, not judged: {named}{more}"]


def nothing_measured(summary: dict[str, Any]) -> str | None:
    """Why a finished run measured nothing, in one line, or ``None``: every agent call failed, or
    every judge reply failed (every verdict of the examples the agent answered, or every request to
    the judge's endpoint). The run is stored; the command then exits 3 with this line."""
    counts, metrics = summary.get("counts", {}), summary.get("metrics", {})
    n, agent = counts.get("n_examples", 0), counts.get("n_agent_errors", 0)
    answered, judged_failed = n - agent, counts.get("n_judge_errors", 0)
    calls, failures = metrics.get("judge_calls") or 0, metrics.get("judge_failures") or 0
    where = f"; the run is stored as {summary['run_id']}" if summary.get("run_id") else ""
    if n and agent == n:
        return f"every agent call failed ({agent} of {n}): nothing was measured{where}"
    if answered and judged_failed == answered:
        return f"every judge verdict failed ({judged_failed} of {answered} answered examples): nothing was judged{where}"
    if calls and failures == calls and not metrics.get("judge_cache_hits"):
        return f"every judge reply failed ({int(failures)} of {int(calls)} requests): the judged metrics are null{where}"
    return None


def endpoint_notes(components) -> tuple[list[str], dict[str, list[str]]]:
    """What the LLM endpoints say once the run is scored: every call failed alike (one line), the
    replies named another model than the one asked for (one line; and those models by section, for
    the summary and the tag ``ragmem.<section>.replied_model``), requests that had failed in an
    earlier run sent again (one line)."""
    notes: list[str] = []
    replied: dict[str, Any] = {}
    for client in (components.llm, components.embedder):
        if client is None:
            continue
        notes.extend(line for line in (client.failure_summary(), client.model_note(), client.rerun_note()) if line)
        others = client.other_models()
        if others:
            replied[client.section] = others
    return notes, replied


def store_location(uri: str) -> str:
    """A tracking URI as the user should read it: a SQLite file by its absolute path, a URL masked.

    >>> store_location("http://bob:pw@mlflow:5000").endswith("bob:***@mlflow:5000")
    True
    """
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:///" + str(Path(uri[len("sqlite:///"):]).resolve())
    return scrub(uri)


def write_json(path: str | Path, payload: dict[str, Any]) -> None:
    """``payload`` as JSON at ``path``, every text in it scrubbed of the secrets held (:func:`scrub_all`);
    written whole or not at all (a file beside it, then renamed: a full disk leaves the old file as it was)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(scrub_all(payload), ensure_ascii=False, indent=2) + "\n"
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
