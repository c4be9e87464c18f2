"""The agent and the judge batch by batch, and a dataset larger than ``data.chunk_size`` scored
chunk by chunk: what :mod:`ragmem.run.engine` runs between opening the run and logging it.

A held dataset is answered and judged batch by batch (:func:`answer_and_judge`) and scored whole.
A streamed one (:attr:`ragmem.data.loaders.Dataset.streamed`) is read again ``data.chunk_size``
examples at a time (:func:`score_in_chunks`); per chunk: answered and judged as above, its table
built and scored (:meth:`ragmem.run.plain_steps.Steps.score_chunk`), its statistics added
(:class:`ragmem.stats.run_statistics.RunStatistics`: the same values and Poisson intervals as the whole
table's), its rows written to a Parquet part in the run folder, and the rows the report and the
label sheet may show kept (a bounded number). Nothing else of a chunk outlives it; the parts
become one ``examples.parquet`` at the end (:func:`join_parts`).
"""

from __future__ import annotations

import collections
import json
import logging
import shutil
import time
from typing import Any
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ragmem.config.loading import RunConfig
from ragmem.data import segments
from ragmem.data.loaders import Dataset
from ragmem.judges import labels
from ragmem.metrics import MetricResult, scored
from ragmem.report import html as report_html
from ragmem.run import pipeline, summary as summaries
from ragmem.run.journal import Journal
from ragmem.run.plain_steps import Steps
from ragmem.runtime import interrupts, progress, space
from ragmem.runtime.forking import release_freed_memory
from ragmem.runtime.parallel import EarlyMaps, mapper_for, ProcessPool
from ragmem.schema import AgentOutput, Example
from ragmem.run.deciding import Decider
from ragmem.stats import clusters
from ragmem.stats.run_statistics import RunStatistics
from ragmem.tracking import files
from ragmem.tracking.agent_traces import traced_calls

log = logging.getLogger("ragmem")

TABLE = "examples.parquet"
PARTS = "examples.parts"  # the chunks' Parquet parts, joined into TABLE at the end
SAMPLE = 1000  # examples of the first chunk a streamed run logs for the dataset's schema


def answer_and_judge(cfg: RunConfig, steps: Steps, components: pipeline.Components, examples: list[Example],
                     journal: Journal, kept: dict[str, AgentOutput], called, judged,
                     decider: Decider | None = None) -> tuple[list[AgentOutput], list]:
    """Per batch: time the agent (each output journaled the moment it is known; the ``kept`` ones
    of a resumed run are not asked again), judge, and begin the batch's scoring on idle workers;
    ``called`` and ``judged`` are the run's progress stages. With a ``decider`` (``gates.stop_when_decided``)
    (or a race's lane, :class:`ragmem.run.racing.Lane`) the batches are its ``batch`` examples, each
    asked only when it says so (``before``), told what it gave (``after``), and none once it has decided."""
    outputs: list[AgentOutput] = []
    judgements: list = []

    def record(output: AgentOutput) -> None:
        journal.append(output)
        called.advance(1, failed=int(output.error is not None))

    sized = pipeline.Batches(examples, decider.batch if decider is not None else cfg.agent.batch_size)
    local = mapper_for(cfg.orchestration.workers)  # the judge's keyword sets: on local processes
    # a live agent leaves the workers idle while it answers: they score each judged batch
    # meanwhile; replayed answers leave no wait to fill (the metrics map them all at once)
    live = cfg.agent.type != "replay"
    components.early = EarlyMaps(local) if live and isinstance(local, ProcessPool) else None
    for i, batch in enumerate(sized):
        interrupts.check()
        if decider is not None and not decider.before(i):  # (a race's lane: stopped, or the race is over)
            break
        space.check()  # a write found the disk full: the run stops, what it paid for kept
        started = time.perf_counter()
        todo = [e for e in batch if e.id not in kept]
        fresh = {o.example_id: o for o in steps.time_agent(components.agent, todo, cfg, i, record)} if todo else {}
        journal.sync()
        answered = [kept.get(e.id) or fresh[e.id] for e in batch]
        pipeline.prime_keywords(batch, answered, components.keywords, local, contexts=False, counted=False)
        verdicts = steps.judge(components.judge, batch, answered, i)
        judged.advance(len(batch), failed=sum(v is not None and v.error is not None for v in verdicts))
        pipeline.start_scoring(batch, answered, cfg, components)  # on the idle workers
        sized.took(time.perf_counter() - started)
        judgements += verdicts
        outputs += answered
        log.debug("agent + judge: %d/%d examples (%d agent errors)", len(outputs), len(examples),
                  sum(o.error is not None for o in outputs))
        if decider is not None:
            decider.after(batch, answered, verdicts, components, cfg)
            if decider.decided:
                log.info("%s", decider.line())
                break
    return outputs, judgements


def answer_and_judge_all(cfg: RunConfig, steps: Steps, components: pipeline.Components, dataset: Dataset,
                         journal: Journal, kept: dict[str, AgentOutput],
                         decider: Decider | None = None) -> tuple[list[AgentOutput], list]:
    """Every example of a held dataset answered and judged, batch by batch, under the run's progress
    (with a ``decider``: until it has decided)."""
    with progress.stage("agent", len(dataset) - len(kept)) as called, progress.stage("judge", len(dataset)) as judged:
        outputs, judgements = answer_and_judge(cfg, steps, components, dataset.examples, journal, kept, called, judged,
                                               decider)
    (log.debug if progress.folded() else log.info)(  # a sweep's children: the sweep's own line says it
        "agent + judge: %d/%d examples (%d agent errors, %d judge errors)", len(outputs), len(dataset),
        sum(o.error is not None for o in outputs), sum(j is not None and j.error is not None for j in judgements))
    return outputs, judgements


@dataclass
class Streamed:
    """What a streamed run leaves for its summary, report and log (sizes bounded, but ``latency_s``)."""

    result: MetricResult
    counts: dict[str, int]
    shown: pd.DataFrame                    # the rows the report may show (failures, worst, disputed)
    latency_s: pd.Series                   # every example's latency (the report's histogram)
    by_file: dict                          # (data file, what) -> count: the report's pass rate per file
    table_path: Path                       # examples.parquet in the run folder
    label_rows: pd.DataFrame | None = None  # candidates for the label sheet (judge.label_sample)
    examples: list = field(default_factory=list)   # the calls traced (failed, slowest) and a sample
    outputs: list = field(default_factory=list)
    coverage: dict = field(default_factory=dict)   # metric -> scored, of, reasons (ragmem.metrics.scored)


@dataclass
class ChunkOutcome:
    """What one scored chunk leaves for the run; its rows are in its Parquet part. The selections
    (shown rows, traced calls) are closed under union: of the chunks' selections, the run's."""

    index: int
    statistics: RunStatistics
    counts: dict[str, int]
    by_file: dict
    shown: pd.DataFrame
    label_rows: pd.DataFrame | None
    latency_s: np.ndarray
    traced: list   # (example, output): failed, then the slowest (tracking.max_traces)
    sample: list   # the first chunk's first SAMPLE (example, output) pairs: the dataset's schema
    usage: dict = field(default_factory=dict)  # what the chunk cost where it ran (:func:`usage`)
    coverage: dict = field(default_factory=dict)  # metric -> scored, of, reasons (ragmem.metrics.scored)


def chunk_outcome(cfg: RunConfig, index: int, chunk: list[Example], outputs: list[AgentOutput],
                  table: pd.DataFrame, result: MetricResult, parts: Path) -> ChunkOutcome:
    """A scored chunk's statistics and kept rows; its table written to its Parquet part."""
    statistics = RunStatistics.of_chunk(table, result, pipeline.run_aggregators(table, result, cfg),
                                        cfg.stats.resamples, cfg.seed, cfg.stats.confidence)
    files.table_file(table, parts, f"part-{index:05d}", "parquet")
    label_rows = labels.pick_rows(table, cfg.judge.label_sample, cfg.seed) if cfg.judge.label_sample else None
    return ChunkOutcome(index, statistics, summaries.table_counts(table), report_html.file_pass_counts(table),
                        report_html.shown_rows(table), label_rows, table["latency_s"].to_numpy(dtype=float),
                        traced_calls(chunk, outputs, cfg.tracking.max_traces),
                        list(zip(chunk[:SAMPLE], outputs[:SAMPLE])) if index == 0 else [],
                        coverage=scored.chunk_coverage(table, list(result.values)))


class _Gathered:
    """The chunks' outcomes, merged in their order (:meth:`take`)."""

    def __init__(self, cfg: RunConfig, components: pipeline.Components):
        self.cfg, self.components = cfg, components
        self.run = RunStatistics(cfg.stats.resamples, cfg.seed, cfg.stats.confidence)
        self.counts: collections.Counter = collections.Counter()
        self.by_file: collections.Counter = collections.Counter()
        self.shown: Any = None
        self.label_rows: Any = None
        self.latency: list[Any] = []
        self.traced: list[Any] = []
        self.sample: list[Any] = []
        self.chunks = 0
        self.coverage: dict = {}

    def take(self, outcome: ChunkOutcome) -> None:
        self.run.merge(outcome.statistics)
        self.counts.update(outcome.counts)
        self.by_file.update(outcome.by_file)
        self.shown = report_html.shown_rows(outcome.shown if self.shown is None
                                            else pd.concat([self.shown, outcome.shown], ignore_index=True))
        if outcome.label_rows is not None:
            self.label_rows = outcome.label_rows if self.label_rows is None else pd.concat(
                [self.label_rows, outcome.label_rows], ignore_index=True)
        self.latency.append(outcome.latency_s)
        self.traced = traced_calls([*(e for e, _ in self.traced), *(e for e, _ in outcome.traced)],
                                   [*(o for _, o in self.traced), *(o for _, o in outcome.traced)],
                                   self.cfg.tracking.max_traces)
        self.sample = self.sample or outcome.sample
        self.coverage = scored.merged(self.coverage, outcome.coverage)
        self.chunks += 1
        if outcome.usage:  # scored elsewhere: its calls and cache lookups counted with the run's
            add_usage(self.components, outcome.usage)
        log.debug("chunk %d: %d examples scored (%d so far)", outcome.index, outcome.counts["n_examples"], self.run.n)


def score_in_chunks(cfg: RunConfig, steps: Steps, components: pipeline.Components, dataset: Dataset,
                    journal: Journal, kept: dict[str, AgentOutput]) -> Streamed:
    """The whole run over a streamed dataset, chunk by chunk (see the module docstring); on Dask
    workers that read their chunks themselves (:func:`score_bounds`) when the steps run there,
    unless the run is resumed (its answers kept so far are in this process)."""
    parts = Path(journal.folder) / PARTS
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir(parents=True)
    gathered = _Gathered(cfg, components)
    with progress.stage("agent", len(dataset) - len(kept)) as called, progress.stage("judge", len(dataset)) as judged:
        if not kept and steps.reads_chunks(cfg):
            for outcome in steps.score_bounds(segments.bounds(dataset), cfg, str(journal.folder), journal.key,
                                              dataset.require_answer):
                gathered.take(outcome)
                called.advance(outcome.counts["n_examples"], failed=outcome.counts["n_agent_errors"])
                judged.advance(outcome.counts["n_examples"], failed=outcome.counts["n_judge_errors"])
            journal.absorb_parts()
        else:
            for index, chunk in enumerate(dataset.chunks()):
                outputs, judgements = answer_and_judge(cfg, steps, components, chunk, journal, kept, called, judged)
                table, result = steps.score_chunk(chunk, outputs, judgements, components, cfg, index)
                gathered.take(chunk_outcome(cfg, index, chunk, outputs, table, result, parts))
                del outputs, judgements, table, result  # (not held while the next chunk is read, answered and scored)
                release_freed_memory(collect=True)  # what the chunk freed, its cycles too, back to the system
    run, counts = gathered.run, gathered.counts
    (log.debug if progress.folded() else log.info)(
        "agent + judge + metrics: %d/%d examples in %d chunks of %d (%d agent errors, %d judge errors)", run.n,
        len(dataset), gathered.chunks, cfg.data.chunk_size, counts["n_agent_errors"], counts["n_judge_errors"])
    values = run.values()
    result = MetricResult(values=values, undefined=run.undefined, notes=run.notes)
    names = [n for n, v in values.items() if v is not None]
    with progress.stage("bootstrap"):
        result.ci = run.intervals(names)
        if run.n_clusters is not None and cfg.stats.cluster_by:
            result.clusters = clusters.describe(cfg.stats.cluster_by, run.n_clusters, run.n, run.design_effects(names))
    result.values.update(pipeline.usage_metrics(components))
    counts.update({f"undefined_{k}": int(v) for k, v in run.undefined.items()})
    table_path = join_parts(parts, Path(journal.folder) / TABLE)
    return Streamed(result, dict(counts), gathered.shown, pd.Series(np.concatenate(gathered.latency), name="latency_s"),
                    dict(gathered.by_file), table_path, gathered.label_rows, *_logged_examples(gathered.traced, gathered.sample),
                    coverage=gathered.coverage)


_WORKER: dict[str, pipeline.Components] = {}  # a Dask worker's components, built once for the run


def score_bounds(chunk_segments: list[segments.Segment], cfg: RunConfig, folder: str, index: int, key: str,
                 require_answer: bool = True) -> ChunkOutcome:
    """One chunk where it runs (a Dask worker): read from its files by its bounds, answered, judged
    and scored as in the flow, its outputs journaled to its own file and its rows written to its
    part, both in the run's ``folder`` (a folder the workers share with the flow); what returns is
    bounded. The components (agent, judge, keyword cache) are built once per run and process."""
    if key not in _WORKER:
        _WORKER.clear()
        _WORKER[key] = pipeline.build_components(cfg)
    components = _WORKER[key]
    before = usage(components)
    chunk = segments.read(chunk_segments, require_answer)
    journal = Journal.part(Path(folder), index)
    steps = Steps()
    try:
        outputs, judgements = answer_and_judge(cfg, steps, components, chunk, journal, {},
                                               progress.Stage("agent", len(chunk)), progress.Stage("judge", len(chunk)))
    finally:
        journal.close()
    table, result = steps.score_chunk(chunk, outputs, judgements, components, cfg, index)
    outcome = chunk_outcome(cfg, index, chunk, outputs, table, result, Path(folder) / PARTS)
    outcome.usage = {what: {k: v - before[what].get(k, 0) for k, v in counts.items()}
                     for what, counts in usage(components).items()}
    return outcome


_USAGE = ("calls", "failures", "cache_hits", "tokens_in", "tokens_out", "cost_usd", "items")


def usage(components: pipeline.Components) -> dict[str, dict[str, Any]]:
    """The counts behind :func:`ragmem.run.pipeline.usage_metrics`: keyword cache lookups, the judge's
    and the embeddings' calls, tokens and cost so far."""
    out = {"keywords": {"hits": components.keywords.hits, "misses": components.keywords.misses}}
    for what in ("llm", "embedder"):
        client = getattr(components, what)
        if client is not None:
            out[what] = {k: getattr(client.usage, k) for k in _USAGE}
    return out


def add_usage(components: pipeline.Components, counts: dict[str, dict[str, Any]]) -> None:
    """Counts of :func:`usage` (a chunk's, where it ran) added to these components'."""
    components.keywords.hits += counts["keywords"]["hits"]
    components.keywords.misses += counts["keywords"]["misses"]
    for what in ("llm", "embedder"):
        client = getattr(components, what)
        if client is not None and what in counts:
            client.usage.add(**counts[what])


def _logged_examples(traced: list, sample: list) -> tuple[list, list]:
    """The examples and outputs a streamed run hands to its log: the calls it traces (failed, then
    the slowest, of every chunk) and the first chunk's first :data:`SAMPLE` (the dataset's schema)."""
    seen = {id(e) for e, _ in traced}
    pairs = traced + [(e, o) for e, o in sample if id(e) not in seen]
    return [e for e, _ in pairs], [o for _, o in pairs]


#: rows of a part copied at a time into the run's table
JOIN_BATCH = 2048


def join_parts(parts: Path, target: Path) -> Path:
    """The chunks' Parquet parts as one file, part after part (one in memory at a time); columns
    a part lacks are null, and a column's type is the one every part's values fit."""
    import pyarrow as pa  # (as ragmem.tracking.files: pyarrow where Parquet is written)
    import pyarrow.parquet as pq

    paths = sorted(parts.glob("part-*.parquet"))
    schemas = [pq.read_schema(p) for p in paths]
    encoded = sorted({c for s in schemas for c in json.loads((s.metadata or {}).get(files.JSON_COLUMNS.encode(), b"[]"))})
    try:
        schema = pa.unify_schemas([s.remove_metadata() for s in schemas], promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # a free-form column of numbers in one chunk, text in another
        names = list(dict.fromkeys(f.name for s in schemas for f in s))
        kinds = {name: {s.field(name).type for s in schemas if name in s.names} - {pa.null()} for name in names}
        schema = pa.schema([(name, kinds[name].pop() if len(kinds[name]) == 1 else pa.string()) for name in names])
    schema = pa.schema([f.with_type(pa.string()) if pa.types.is_null(f.type) else f for f in schema],
                       metadata={files.JSON_COLUMNS: json.dumps(encoded)})
    with pq.ParquetWriter(target, schema) as writer:
        for path in paths:  # a part's record batches one at a time: a whole part read at once held 80 MB at 20k
            for batch in pq.ParquetFile(path).iter_batches(batch_size=JOIN_BATCH):
                columns = [batch.column(f.name).cast(f.type) if f.name in batch.schema.names
                           else pa.nulls(len(batch), f.type) for f in schema]
                writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=schema))
    shutil.rmtree(parts, ignore_errors=True)
    pa.default_memory_pool().release_unused()  # (what pyarrow's allocator keeps for reuse: nothing else reads Parquet now)
    return target
