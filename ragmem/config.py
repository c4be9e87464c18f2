"""Run configuration: defaults, YAML files, ``--set dotted.key=value`` overrides, validation.

The defaults below are the single source: the CLI, the Python API and the README table read them.
Relative data paths in a config file are resolved against the file's folder; paths given on the
command line (``--data``) against the working directory.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ragmem.errors import ConfigError
from ragmem.loaders import DataFile, parse_label
from ragmem.metrics import DEFAULT_METRICS, RELEVANCE_MODES, expand_selection
from ragmem.metrics.ranking import DEFAULT_KS
from ragmem.metrics._division import parse_zero_division
from ragmem.text.keywords import DEFAULT_STOPWORDS, DEFAULT_TOKENIZER

DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"
DEFAULT_ARTIFACT_ROOT = "mlruns/artifacts"

DEFAULTS: dict[str, Any] = {
    "experiment": "ragmem",
    "run_name": None,
    "seed": 0,
    "data": {"files": [], "format": "auto"},
    "agent": {"type": "replay", "target": None, "params": {}, "url": None, "api_key_env": None,
              "concurrency": 4, "timeout_s": 60.0, "retries": 2, "retry_backoff_s": 0.5, "batch_size": 256},
    "judge": {"type": "keyword", "threshold": 0.7, "model": None, "base_url": None, "api_key_env": None,
              "max_concurrency": 8, "timeout_s": 60, "max_retries": 4, "retry_backoff_s": 1.0,
              "temperature": 0.0, "seed": 0, "response_format": "auto", "cache": True, "cache_dir": None,
              "prices": {}},
    "rag_metrics": {"threshold": 0.5, "contextual_precision_top_k": None, "relevancy_questions": 3},
    # the reference agent (agent.type: reference)
    "corpus": {"path": "bundled", "chunk_size": 200, "chunk_overlap": 40},
    "retriever": {"type": "bm25", "top_k": 5, "reranker": "none", "rerank_candidates": 20},
    "memory": {"short_window": 4, "long_top_k": 2},
    "generator": {"type": "extractive", "model": None, "base_url": None, "api_key_env": None,
                  "temperature": 0.0, "timeout_s": 60},
    "embeddings": {"model": None, "base_url": None, "api_key_env": None, "timeout_s": 60, "max_concurrency": 8,
                   "max_retries": 4, "retry_backoff_s": 1.0, "cache": True, "cache_dir": None},
    "keywords": {"tokenizer": DEFAULT_TOKENIZER, "stopwords": list(DEFAULT_STOPWORDS)},
    "metrics": list(DEFAULT_METRICS),
    "ranking": {"k": list(DEFAULT_KS), "relevance": "auto", "keyword_threshold": 0.5},
    "generation": {"tokenizer": "jieba", "bleu_tokenize": "zh"},
    "stats": {"resamples": 1000, "confidence": 0.95},
    "zero_division": 0,
    "tracking": {"enabled": True, "uri": None, "artifact_root": DEFAULT_ARTIFACT_ROOT, "max_traces": 200},
    "sweep": {},  # see ragmem.sweep (used by `ragmem sweep`; ignored by `ragmem run`)
    # the memory benchmark (`ragmem bench-memory`), see ragmem.memory_bench
    "bench": {"data": None, "methods": ["reference", "full_context", "no_memory"], "top_k": 10,
              "full_context_tokens": 4000, "include_adversarial": False, "limit_conversations": None,
              "limit_questions": None},
}
#: Keys whose value is free-form (not checked against DEFAULTS).
_OPEN_KEYS = {"agent.params", "sweep", "judge.prices", "bench.methods"}


def _merge(base: dict[str, Any], update: dict[str, Any], where: str = "") -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in update.items():
        dotted = f"{where}{key}"
        if key not in base:
            known = ", ".join(sorted(base)) or "(none)"
            raise ConfigError(f"{dotted}: unknown setting; known at this level: {known}")
        if dotted in _OPEN_KEYS and isinstance(base[key], dict) and isinstance(value, dict):
            out[key] = _deep_update(base[key], value)  # free-form: merged, not checked
        elif isinstance(base[key], dict):
            if not isinstance(value, dict):
                raise ConfigError(f"{dotted}: expected a mapping, got {type(value).__name__}")
            out[key] = _merge(base[key], value, dotted + ".")
        else:
            out[key] = copy.deepcopy(value)
    return out


def _deep_update(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(out.get(key), dict) and isinstance(value, dict):
            out[key] = _deep_update(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b=value`` -> (['a', 'b'], parsed value); the value is read as YAML (``[1, 3]``, ``0.5``)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {text!r}: expected dotted.key=value")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def assign(config: dict[str, Any], keys: list[str], value: Any) -> dict[str, Any]:
    """A copy of ``config`` with the setting at ``keys`` replaced by ``value`` (``--set`` semantics:
    the value replaces what was there; unknown keys are errors outside free-form sections)."""
    out = copy.deepcopy(config)
    node, defaults, open_section = out, DEFAULTS, False
    for depth, part in enumerate(keys):
        dotted = ".".join(keys[: depth + 1])
        last = depth == len(keys) - 1
        if not open_section and (not isinstance(defaults, dict) or part not in defaults):
            known = ", ".join(sorted(defaults)) if isinstance(defaults, dict) else "(none)"
            raise ConfigError(f"{dotted}: unknown setting; known at this level: {known}")
        if last:
            if not open_section and isinstance(defaults[part], dict) and dotted not in _OPEN_KEYS:
                if not isinstance(value, dict):
                    raise ConfigError(f"{dotted}: expected a mapping, got {type(value).__name__}")
                node[part] = _merge(defaults[part], value, dotted + ".")
            else:
                node[part] = copy.deepcopy(value)
            return out
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
        open_section = open_section or dotted in _OPEN_KEYS
        defaults = defaults[part] if not open_section else None
    return out


def read_config_file(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    bench = raw.get("bench")
    if isinstance(bench, dict) and isinstance(bench.get("data"), str) and not Path(bench["data"]).is_absolute():
        bench["data"] = str((path.parent / bench["data"]).resolve())
    files = (raw.get("data") or {}).get("files") if isinstance(raw.get("data"), dict) else None
    if isinstance(files, list):  # resolve data paths against the config file's folder
        for item in files:
            if isinstance(item, dict) and isinstance(item.get("path"), str):
                item["path"] = str((path.parent / item["path"]).resolve()) \
                    if not Path(item["path"]).is_absolute() else item["path"]
    return raw


def resolve_config(path: str | Path | None = None, overrides: list[str] | None = None,
                   data: str | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Defaults <- config file <- ``extra`` (API keyword arguments) <- ``--set`` <- ``--data``."""
    config = copy.deepcopy(DEFAULTS)
    if path is not None:
        config = _merge(config, read_config_file(path))
    if extra:
        config = _merge(config, extra)
    for text in overrides or []:
        keys, value = parse_override(text)
        config = assign(config, keys, value)
    if data is not None:
        config["data"]["files"] = [{"path": str(Path(data).resolve())}]
    RunConfig.from_dict(config)  # validate now, so errors name the setting before any work starts
    return config


def _number(config: dict[str, Any], dotted: str, minimum: float, integer: bool = False,
            allow_none: bool = False) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = value[part]
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        kind = "an integer" if integer else "a number"
        raise ConfigError(f"{dotted}: expected {kind}, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{dotted}: must be >= {minimum}, got {value!r}")
    return value


@dataclass(frozen=True)
class RunConfig:
    """The validated, typed view of a resolved config dict."""

    raw: dict[str, Any]
    experiment: str
    run_name: str | None
    seed: int
    files: tuple[DataFile, ...]
    agent: dict[str, Any]
    judge: dict[str, Any]
    tokenizer: str
    stopwords: tuple[str, ...]
    metrics: tuple[str, ...]
    ks: tuple[int, ...]
    relevance: str
    keyword_threshold: float
    zero_division: float
    tracking_enabled: bool
    tracking_uri: str
    artifact_root: str
    concurrency: int
    timeout_s: float | None
    batch_size: int

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> "RunConfig":
        config = _merge(DEFAULTS, config)
        if not isinstance(config["experiment"], str) or not config["experiment"].strip():
            raise ConfigError("experiment: expected a non-empty name")
        files = []
        raw_files = config["data"]["files"]
        if not isinstance(raw_files, list):
            raise ConfigError("data.files: expected a list of {path, label?, format?}")
        for i, item in enumerate(raw_files):
            if isinstance(item, str):
                item = {"path": item}
            if not isinstance(item, dict) or not isinstance(item.get("path"), str):
                raise ConfigError(f"data.files[{i}]: expected {{path: FILE, label?: 0|1}}")
            unknown = set(item) - {"path", "label", "format"}
            if unknown:
                raise ConfigError(f"data.files[{i}]: unknown key(s) {', '.join(sorted(unknown))}")
            label = None
            if item.get("label") is not None:
                try:
                    label = parse_label(item["label"])
                except ValueError as exc:
                    raise ConfigError(f"data.files[{i}].label: {exc}") from None
            files.append(DataFile(Path(item["path"]), label, item.get("format") or config["data"]["format"]))
        judge = config["judge"]
        threshold = _number(config, "judge.threshold", 0.0)
        if threshold > 1:
            raise ConfigError(f"judge.threshold: must be between 0 and 1, got {threshold}")
        stopwords = config["keywords"]["stopwords"] or []
        if not isinstance(stopwords, list):
            raise ConfigError("keywords.stopwords: expected a list such as [stopwords-iso:zh, stopwords:en]")
        metrics = config["metrics"]
        if not isinstance(metrics, list) or not metrics:
            raise ConfigError(f"metrics: expected a non-empty list of names from {', '.join(DEFAULT_METRICS)}")
        ks = config["ranking"]["k"]
        if not isinstance(ks, list) or not ks or not all(isinstance(k, int) and not isinstance(k, bool)
                                                         and k >= 1 for k in ks):
            raise ConfigError(f"ranking.k: expected a list of integers >= 1, got {ks!r}")
        if config["ranking"]["relevance"] not in RELEVANCE_MODES:
            raise ConfigError(f"ranking.relevance: expected one of {', '.join(RELEVANCE_MODES)}, "
                              f"got {config['ranking']['relevance']!r}")
        keyword_threshold = _number(config, "ranking.keyword_threshold", 0.0)
        selected = expand_selection(metrics, ks)
        if judge.get("type") == "llm":
            if not judge.get("model"):
                raise ConfigError("judge.model: required with judge.type llm (the model name the endpoint serves)")
            if "answer_relevancy" in selected and not config["embeddings"].get("model"):
                raise ConfigError("embeddings.model: answer_relevancy with judge.type llm needs an embeddings endpoint "
                                  "(set embeddings.model and embeddings.base_url, or leave answer_relevancy out of metrics)")
        tracking = config["tracking"]
        uri = tracking["uri"] or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
        timeout = _number(config, "agent.timeout_s", 0.001, allow_none=True)
        _number(config, "agent.retries", 0, integer=True)
        _number(config, "agent.retry_backoff_s", 0.0)
        _number(config, "tracking.max_traces", 0, integer=True)
        _number(config, "stats.resamples", 0, integer=True)
        confidence = _number(config, "stats.confidence", 0.0)
        if not 0 < confidence < 1:
            raise ConfigError(f"stats.confidence: must be between 0 and 1, got {confidence}")
        return cls(
            raw=config, experiment=config["experiment"], run_name=config["run_name"],
            seed=_number(config, "seed", 0, integer=True), files=tuple(files),
            agent=config["agent"], judge=judge,
            tokenizer=str(config["keywords"]["tokenizer"]), stopwords=tuple(map(str, stopwords)),
            metrics=tuple(metrics), ks=tuple(sorted(set(ks))),
            relevance=config["ranking"]["relevance"], keyword_threshold=float(keyword_threshold),
            zero_division=parse_zero_division(config["zero_division"]),
            tracking_enabled=bool(tracking["enabled"]), tracking_uri=str(uri),
            artifact_root=str(tracking["artifact_root"] or DEFAULT_ARTIFACT_ROOT),
            concurrency=_number(config, "agent.concurrency", 1, integer=True),
            timeout_s=None if timeout is None else float(timeout),
            batch_size=_number(config, "agent.batch_size", 1, integer=True),
        )

    def require_data(self) -> None:
        if not self.files:
            raise ConfigError("data.files: no dataset given; pass --data PATH or list data.files in the config")
