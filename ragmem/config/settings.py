"""The typed config schema, declared once: every setting with its type, default, allowed values and
a one-line description (pydantic v2 models; pydantic comes with Prefect).

Types are strict: a YAML ``"5"`` is not the number 5, ``"no"`` is not ``false``, ``0`` is not a
``top_k``. The whole config (sweep grids and bench methods included) is validated by
:func:`ragmem.config.loading.validate` before any agent, judge or endpoint is built, and an error names the
dotted setting, the value given and what is allowed (:func:`ragmem.config.loading.describe_error`)::

    judge.timeout_s: expected a number > 0, got 'abc'

The documentation's settings tables (``docs/``) and its generated configuration reference are checked
against these models by ``tests/config/test_config.py`` and ``tests/test_docs.py``. What every section is
made of is :mod:`ragmem.config.sections`; the sections of sweeps, memory benchmarks and gates are in
:mod:`ragmem.config.sweep_settings`, those of ``ragmem generate`` in
:mod:`ragmem.config.generate_settings` (all importable from here).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal, Optional, Union

from annotated_types import Ge, Gt, Le, Lt
from pydantic import Field, field_serializer, field_validator, model_validator

from ragmem.config.sections import (Backoff, Count, Positive, Processes, Resamples, Retries, Seconds, Section,  # noqa: F401
                                    Share, setting, Threads)
from ragmem.runtime.home import DEFAULT_ARTIFACT_ROOT
# the sections of sweeps, memory benchmarks and gates (their own module), also importable from here
from ragmem.config.sweep_settings import BenchSettings, Bounds, Constraint, Gate, MethodSpec  # noqa: F401
from ragmem.config.sweep_settings import Objective, SweepSettings, TieBreak  # noqa: F401
from ragmem.config.alert_settings import AlertSettings
from ragmem.config.generate_settings import GenerateSettings  # noqa: F401
from ragmem.config.trace_settings import TracesSettings
# what a run computes: the metrics selected, one's own, the rubrics (their own module)
from ragmem.config.metric_settings import CustomMetricSettings, MetricSettings, RubricExample, RubricSettings  # noqa: F401
from ragmem.data.loaders import parse_label
from ragmem.data.readers import check_encoding
from ragmem.metrics._division import parse_zero_division
from ragmem.metrics.names import expand_selection, RELEVANCE_MODES
from ragmem.metrics.options import DEFAULT_MIN_KAPPA, GenerationOptions, RagOptions
from ragmem.prompts.rubrics import check as check_rubric



# ---- data ---------------------------------------------------------------------------------------

class DataFileSpec(Section):
    path: str = Field(description="dataset file (relative paths: against the config file's folder)")
    label: Optional[Union[int, bool, str]] = setting(None, "file-level label: 1/0, true/false, yes/no")
    format: Optional[Literal["auto", "json", "jsonl", "csv", "parquet"]] = setting(None, "overrides data.format")

    @field_validator("label")
    @classmethod
    def _label(cls, value):
        return None if value is None else parse_label(value)


class DataSettings(Section):
    files: list[DataFileSpec] = setting([], "list of {path, label?, format?}")
    format: Literal["auto", "json", "jsonl", "csv", "parquet"] = setting("auto", "file format, or by suffix")
    coerce_numbers: bool = setting(False, "read a number where text is expected (query, answers, contexts, ids) "
                                          "as its JSON text (42 -> '42', 42.0 -> '42.0') instead of refusing it")
    encoding: str = setting("utf-8", "text encoding of JSON, JSONL and CSV files (e.g. gb18030 for a Chinese "
                                     "file saved by Excel); a byte-order mark is allowed")
    traces: TracesSettings = setting(TracesSettings, "production traces as the data (instead of files): "
                                                     "an MLflow experiment or OTLP JSON files")
    chunk_size: Positive = setting(10_000, "examples held at once: a larger dataset is read, answered, judged, "
                                           "scored and logged this many at a time, with the same metrics")
    _encoding = field_validator("encoding")(lambda cls, value: check_encoding(value))

    @field_validator("files", mode="before")
    @classmethod
    def _paths(cls, value):
        return [{"path": v} if isinstance(v, str) else v for v in value] if isinstance(value, list) else value


# ---- the system under test ----------------------------------------------------------------------

class AgentSettings(Section):
    type: Literal["replay", "python", "http", "reference"] = setting("replay", "what answers the queries")
    target: Optional[str] = setting(None, "module:function or module:Class (agent.type python)")
    params: dict[str, Any] = setting({}, "constructor arguments of a class target")
    url: Optional[str] = setting(None, "endpoint of an http agent")
    api_key_env: Optional[str] = setting(None, "environment variable holding the http agent's key")
    concurrency: Threads = setting(4, "calls in flight at once (at most 1024)")
    timeout_s: Optional[Seconds] = setting(60.0, "per call; null for none")
    retries: Retries = setting(2, "retries of a failed call (at most 100)")
    retry_backoff_s: Backoff = setting(0.5, "first backoff, doubling, jittered")
    batch_size: Union[Positive, Literal["auto"]] = setting(
        "auto", "examples per Prefect task (auto: 256 first, then grown while a batch takes under 2 s)")

    @model_validator(mode="after")
    def _needs(self):
        if self.type == "python" and not self.target:
            raise ValueError("agent.target: required for agent.type python (e.g. 'mypkg.agent:answer')")
        if self.type == "http" and not (self.url or "").startswith(("http://", "https://")):
            raise ValueError(f"agent.url: expected an http(s) URL for agent.type http, got {self.url!r}")
        if self.params and self.type != "python":
            raise ValueError("agent.params: only a python agent takes params")
        return self


class CorpusSettings(Section):
    path: str = setting("bundled", "bundled, or a JSON file {documents, memories} (relative: against the config "
                                   "file's folder)")
    chunk_size: Positive = setting(200, "chunk window in characters")
    chunk_overlap: Count = setting(40, "characters shared by consecutive chunks")

    @model_validator(mode="after")
    def _overlap(self):
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(f"corpus.chunk_overlap: must be smaller than corpus.chunk_size "
                             f"({self.chunk_size}), got {self.chunk_overlap}")
        return self


class RetrieverSettings(Section):
    type: Literal["bm25", "tfidf", "dense", "hybrid"] = setting("bm25", "retriever of the reference agent")
    top_k: Positive = setting(5, "chunks returned")
    reranker: Literal["none", "keyword"] = setting("none", "reorder the first rerank_candidates")
    rerank_candidates: Positive = setting(20, "candidates the reranker reorders")


class MemorySettings(Section):
    short_window: Count = setting(4, "last turns of the session kept as short-term memory")
    long_top_k: Count = setting(2, "long-term facts retrieved")


def _needs_model(settings, section: str, kind: str):
    """A section whose ``type`` calls an endpoint must name the model it serves."""
    if settings.type == kind and not settings.model:
        raise ValueError(f"{section}.model: required with {section}.type {kind} (the model name the endpoint serves)")
    return settings


class EndpointSettings(Section):
    """An OpenAI-compatible endpoint."""

    model: Optional[str] = setting(None, "model name the endpoint serves")
    base_url: Optional[str] = setting(None, "endpoint URL (default: OpenAI)")
    api_key_env: Optional[str] = setting(None, "environment variable holding the key (never the key)")
    timeout_s: Seconds = setting(60.0, "per request")
    max_retries: Retries = setting(4, "retries on 429/5xx/timeouts/connection errors (at most 100)")
    retry_backoff_s: Backoff = setting(1.0, "first backoff, doubling, jittered")


class GeneratorSettings(EndpointSettings):
    type: Literal["extractive", "openai"] = setting("extractive", "how the reference agent answers")
    temperature: Annotated[float, Ge(0)] = setting(0.0, "sent with every request")
    max_tokens: Positive = setting(256, "reply limit sent with every request (an answer is one or two sentences)")

    _model = model_validator(mode="after")(lambda self: _needs_model(self, "generator", "openai"))


class ClientSettings(EndpointSettings):
    max_concurrency: Threads = setting(8, "requests in flight (at most 1024)")
    cache: bool = setting(True, "persistent cache of replies")
    cache_dir: Optional[str] = setting(None, "default $RAGMEM_HOME/judge-cache")


class EmbeddingSettings(ClientSettings):
    pass


class Price(Section):
    input: Annotated[float, Ge(0)] = Field(description="USD per million input tokens")
    output: Annotated[float, Ge(0)] = Field(description="USD per million output tokens")

    def usd(self, tokens_in: int, tokens_out: int) -> float:
        """What ``tokens_in`` input and ``tokens_out`` output tokens cost."""
        return (tokens_in * self.input + tokens_out * self.output) / 1e6


def _samples_need_llm(settings):
    if settings.samples > 1 and not settings.asks_llm:
        raise ValueError(f"judge.samples: {settings.samples} needs judge.type llm (the keyword judge gives the "
                         f"same verdict every time)")
    return settings


class JudgeSettings(ClientSettings):
    type: Literal["keyword", "llm"] = setting("keyword", "offline keyword judge or an LLM")
    threshold: Share = setting(0.7, "keyword verdict 1 when overlap > threshold")
    temperature: Annotated[float, Ge(0)] = setting(0.0, "sent with every request")
    seed: Optional[int] = setting(0, "sent with every request")
    response_format: Literal["auto", "json_schema", "json_object", "text"] = setting(
        "auto", "json_schema, then json_object, then text when rejected; or force one")
    max_tokens: Positive = setting(1024, "reply limit sent with every request (fits a claims list of the wire "
                                         "contract); a reply cut off by it is invalid: one repair, then a failure")
    prices: dict[str, Price] = setting({}, "{model: {input, output}} in USD per million tokens")
    samples: Annotated[int, Ge(1), Le(100)] = setting(1, "times every LLM verdict (or rubric score) is asked (the majority decides, a tie "
                                   "is undecided; a rubric: the mean score)")
    batch_rubrics: bool = setting(False, "judge every rubric of one example in one request (a score per rubric)")
    prompt_variant: Literal["default", "strict"] = setting("default", "the built-in prompts, or their stricter "
                                                                      "variant (docs: Judges and LLM metrics)")
    min_kappa: Annotated[float, Ge(-1), Le(1)] = setting(
        DEFAULT_MIN_KAPPA, "the judge is flagged unreliable when the upper end of its kappa interval with the labels is below this")
    label_sample: Optional[Positive] = setting(None, "write this many examples, stratified by verdict, to "
                                                     "labels_to_fill.csv in the run folder for a person to label")

    _model = model_validator(mode="after")(lambda self: _needs_model(self, "judge", "llm"))
    _samples = model_validator(mode="after")(lambda self: _samples_need_llm(self))

    @property
    def asks_llm(self) -> bool:
        """Whether this judge asks an LLM (``judge.type: llm``): the one place the judge's kind is read;
        :mod:`ragmem.judges` builds from it, and the endpoints a run calls follow it."""
        return self.type == "llm"


class RagMetricSettings(Section):
    threshold: Share = setting(RagOptions.threshold, "pass threshold of {metric}_pass_rate")
    contextual_precision_top_k: Optional[Positive] = setting(RagOptions.contextual_precision_top_k,
                                                             "chunks judged per example (null: all)")
    relevancy_questions: Positive = setting(RagOptions.relevancy_questions, "questions generated per answer")
    relevancy: Literal["auto", "questions", "statements"] = setting(
        RagOptions.relevancy, "how an LLM judge scores answer_relevancy: questions (RAGAS: needs embeddings), "
        "statements (DeepEval: the chat model alone), auto (questions with an embeddings endpoint, else statements)")


# ---- metrics ------------------------------------------------------------------------------------

Tokenizer = Literal["jieba", "rjieba", "char"]


class KeywordSettings(Section):
    tokenizer: Tokenizer = setting("rjieba", "rjieba (jieba's dictionary and HMM in Rust), jieba (the pure-Python "
                                              "reference: the same tokens, 20-40x slower) or char")
    stopwords: list[str] = setting(["stopwords-iso:zh", "stopwords:en"], "lists as SOURCE:LANG; [] for none")
    cache_size: Positive = setting(262_144, "keyword sets of distinct texts kept in memory, the least recently "
                                            "used dropped first (its hit rate: the metric keywords_cache_hit_rate)")


class RankingSettings(Section):
    k: Annotated[list[Positive], Field(min_length=1)] = setting([1, 3, 5, 10], "cut-offs of the ranking metrics")
    relevance: Literal[RELEVANCE_MODES] = setting("auto", "where gold relevance comes from")  # type: ignore[valid-type]  # (the choices declared once, as a tuple)
    keyword_threshold: Share = setting(0.5, "offline relevance: share of the reference's keywords")


class GenerationSettings(Section):
    tokenizer: Tokenizer = setting(GenerationOptions.tokenizer, "tokens of bleu_1, ROUGE, token_f1, exact_match")
    bleu_tokenize: Literal["none", "zh", "13a", "intl", "char"] = setting(GenerationOptions.bleu_tokenize,
                                                                          "sacrebleu tokenizer of bleu")


class StatsSettings(Section):
    resamples: Resamples = setting(1000, "bootstrap resamples (0: no intervals; at most 1,000,000)")
    confidence: Annotated[float, Gt(0), Lt(1)] = setting(0.95, "interval level")
    bootstrap: Literal["poisson", "classic"] = setting(
        "poisson", "how examples are resampled: poisson (a Poisson(1) weight per example and resample, "
                   "drawn from its id: the same intervals whatever the chunks or workers) or classic "
                   "(index vectors drawn with replacement, as before 2026-12)")
    cluster_by: Optional[str] = setting(
        None, "a record field whose examples belong together (conversation_id, session_id, document, user): "
              "intervals, paired comparisons and gates resample these clusters, not examples, and the design "
              "effect is reported; a record without the field is a cluster of its own")


class ReportSettings(Section):
    min_coverage: Share = setting(0.9, "a metric scored on less than this share of the examples it could have "
                                       "been is marked partial, with how many and why (summary JSON: partial)")


class TrackingSettings(Section):
    enabled: bool = setting(True, "false skips MLflow")
    uri: Optional[str] = setting(None, "MLflow tracking URI (default MLFLOW_TRACKING_URI, else sqlite)")
    artifact_root: str = setting(DEFAULT_ARTIFACT_ROOT, "where new experiments keep artifacts")
    max_traces: Count = setting(200, "agent calls traced per run")
    table_copies_max_rows: Count = setting(
        50_000, "the per-example table is logged as examples.parquet, and up to this many rows also as "
                "examples.csv and the MLflow table examples.json")


class OrchestrationSettings(Section):
    task_runner: Literal["threads", "dask"] = setting(
        "threads", "where scoring batches and sweep children run: this process (threads, with a local "
                   "process pool for scoring) or Dask (prefect-dask's DaskTaskRunner)")
    workers: Union[Processes, Literal["auto"]] = setting(
        "auto", "local processes that score examples (auto: the cores this process may use; 1: none)")
    dask_address: Optional[str] = setting(None, "scheduler of an existing Dask cluster (tcp://HOST:8786); "
                                                "default: a LocalCluster on this machine")
    dask_workers: Optional[Processes] = setting(None, "workers of the LocalCluster (default: the cores; at most 512)")
    server_idle_s: Optional[Annotated[float, Ge(0)]] = setting(
        1800.0, "how long the local Prefect server (shared by every home) stays up after the last command that "
                "used it ended (null: until ragmem server stop); the last command to end sets it")



class ReferenceSettings(Section):
    """The sections the reference agent reads (``agent.type: reference``); embeddings and keywords are
    read by the judge and the metrics too (:data:`SHARED`), the others by the reference agent alone."""

    SHARED: ClassVar[tuple[str, ...]] = ("embeddings", "keywords")

    corpus: CorpusSettings = setting(CorpusSettings, "reference agent: corpus")
    retriever: RetrieverSettings = setting(RetrieverSettings, "reference agent: retriever")
    memory: MemorySettings = setting(MemorySettings, "reference agent: memory")
    generator: GeneratorSettings = setting(GeneratorSettings, "reference agent: generator")
    embeddings: EmbeddingSettings = setting(EmbeddingSettings, "embeddings endpoint")
    keywords: KeywordSettings = setting(KeywordSettings, "keyword extraction")

    @model_validator(mode="after")
    def _dense(self):
        if self.retriever.type == "dense" and not self.embeddings.model:
            raise ValueError("embeddings.model: retriever.type dense needs an embeddings model "
                             "(an OpenAI-compatible endpoint, or local:NAME)")
        return self


#: the reference agent's sections, declared once by :class:`ReferenceSettings`; those it alone reads
REFERENCE_SECTIONS: tuple[str, ...] = tuple(ReferenceSettings.model_fields)
REFERENCE_ONLY: tuple[str, ...] = tuple(s for s in REFERENCE_SECTIONS if s not in ReferenceSettings.SHARED)


def run_setting(params: dict[str, Any], key: str) -> Any:
    """A run's setting ``key`` (``report.min_coverage``) as its params hold it, else the schema's default
    (a setting a run leaves at its default is not always logged): where a command reads a run back."""
    if key in params:
        return params[key]
    model: Any = Settings
    *sections, name = key.split(".")
    for section in sections:
        model = model.model_fields[section].annotation
    return model.model_fields[name].default


# ---- the whole config ---------------------------------------------------------------------------

class Settings(ReferenceSettings):
    """The whole config: the reference agent's sections (inherited) and every other one."""

    experiment: Annotated[str, Field(min_length=1, max_length=500)] = setting(
        "ragmem", "MLflow experiment name (MLflow keeps at most 500 characters)")
    run_name: Optional[Annotated[str, Field(max_length=250)]] = setting(
        None, "MLflow run name and Prefect flow-run name (at most 250 characters); default: the config file's name, "
              "each --set and the --data file (demo judge.threshold=0.5 data=x.jsonl)")
    seed: Count = setting(0, "logged; used by sampling steps")
    data: DataSettings = setting(DataSettings, "the dataset")
    agent: AgentSettings = setting(AgentSettings, "the system under test")
    judge: JudgeSettings = setting(JudgeSettings, "the judge")
    rag_metrics: RagMetricSettings = setting(RagMetricSettings, "LLM-based RAG metrics")
    rubrics: dict[str, RubricSettings] = setting({}, "criteria of your own, each the metric rubric_<name> "
                                                    "(needs judge.type llm)")
    metrics: MetricSettings = setting(MetricSettings, "which metrics: a list of names (short for metrics.names), or "
                                                      "{names, custom}")
    ranking: RankingSettings = setting(RankingSettings, "ranking metrics")
    generation: GenerationSettings = setting(GenerationSettings, "generation metrics")
    stats: StatsSettings = setting(StatsSettings, "confidence intervals")
    report: ReportSettings = setting(ReportSettings, "what the outputs mark")
    zero_division: float = setting(math.nan, "value of a 0/0 ratio: nan (undefined: null, left out of means), 0 or 1")
    tracking: TrackingSettings = setting(TrackingSettings, "MLflow")
    orchestration: OrchestrationSettings = setting(OrchestrationSettings, "where the work runs")
    sweep: SweepSettings = setting(SweepSettings, "read by ragmem sweep")
    bench: BenchSettings = setting(BenchSettings, "read by ragmem bench-memory")
    generate: GenerateSettings = setting(GenerateSettings, "read by ragmem generate: LLM-written questions")
    alerts: AlertSettings = setting(AlertSettings, "who hears of a failed gate, a drift, a failed run: {to, on, "
                                                   "errors_over}")
    gates: dict[str, Gate] = setting({}, "quality gates checked after ragmem run: {metric: {min?, max?}}; "
                                         "a failed gate exits 3")
    baseline: Optional[str] = setting(None, "run id (or unique prefix) the max_regression gates compare with")
    import_paths: list[str] = setting([], "folders where agent.target and bench method targets are imported "
                                          "from, after the working directory (a config file's folder is added)")

    def rubric_definitions(self) -> tuple:
        """The config's rubrics as :class:`ragmem.prompts.rubrics.Rubric` (checked: a problem is a ValueError
        naming the rubric's setting)."""
        out = []
        for name, rubric in self.rubrics.items():
            try:
                out.append(check_rubric(name, rubric.criteria, rubric.scale, rubric.inputs, rubric.steps,
                                        [e.model_dump() for e in rubric.examples]))
            except ValueError as exc:
                where = "" if str(exc).startswith("rubric name") else "."
                raise ValueError(f"rubrics.{name}{where}{exc}" if where else f"rubrics.{name}: {exc}") from None
        return tuple(out)

    @field_validator("zero_division", mode="before")
    @classmethod
    def _zero_division(cls, value):
        if isinstance(value, bool):
            raise ValueError(f"expected 0, 1 or nan, got {value!r}")
        return parse_zero_division(value)

    @field_serializer("zero_division")
    def _zero_division_out(self, value: float):
        return "nan" if math.isnan(value) else value

    @model_validator(mode="after")
    def _across(self):
        regress = [m for m, g in self.gates.items() if g.max_regression is not None]
        if regress and not self.baseline and not self.data.traces.experiment:  # (traces: the previous window)
            raise ValueError(f"gates.{regress[0]}.max_regression: needs a baseline run "
                             "(--baseline RUN_ID, or baseline: RUN_ID in the config; a window of traces: the previous one)")
        drifting = [m for m, g in self.gates.items() if g.drift is not None]
        if drifting and not self.data.traces.experiment:
            raise ValueError(f"gates.{drifting[0]}.drift: watches windows of traffic: needs data.traces.experiment "
                             "(the traces of an MLflow experiment, run on a schedule with data.traces.incremental)")
        own = self.metrics.custom_names
        selected = expand_selection([m for m in self.metrics.names if m not in own], self.ranking.k)
        self.rubric_definitions()  # each rubric checked whole (its examples against its scale)
        if self.rubrics and not self.judge.asks_llm:
            raise ValueError(f"rubrics: scored by an LLM judge: set judge.type llm (and judge.model), got judge.type "
                             f"{self.judge.type}")
        undefined = [m for m in selected if m.startswith("rubric_") and m[len("rubric_"):] not in self.rubrics]
        if undefined:
            raise ValueError(f"metrics: {undefined[0]} is not a rubric of the config (rubrics: "
                             f"{', '.join(self.rubrics) or 'none'}); a rubric's metric is computed without naming it")
        if self.rag_metrics.relevancy == "questions" and not self.embeddings.model:
            raise ValueError("rag_metrics.relevancy: questions compares the embeddings of generated questions: it "
                             "needs an embeddings endpoint (set embeddings.model and embeddings.base_url, or "
                             "rag_metrics.relevancy auto or statements, which the chat model alone scores)")
        if self.rag_metrics.relevancy != "auto" and not self.judge.asks_llm:
            raise ValueError(f"rag_metrics.relevancy: {self.rag_metrics.relevancy} asks an LLM judge: set judge.type "
                             "llm, or leave rag_metrics.relevancy auto (offline: the cosine of query and answer)")
        if self.data.traces.given and (self.data.files or self.agent.type != "replay"):
            raise ValueError("data.traces: the traces are the data and hold the answers: "
                             + ("leave data.files empty" if self.data.files else
                                f"agent.type must be replay (the agent is not called), got {self.agent.type}"))
        return self
