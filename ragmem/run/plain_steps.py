"""The steps of a run as plain function calls (:class:`Steps`): what :mod:`ragmem.run.engine` orders.
``ragmem.tasks.steps.PrefectSteps`` runs the same methods as Prefect tasks; the Python API and
pytest use :data:`PLAIN`."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from ragmem.config.loading import RunConfig
from ragmem.data.loaders import Dataset
from ragmem.errors import failure_message
from ragmem.memory import bench_data, benchmark as memory_bench
from ragmem.run import pipeline
from ragmem.runtime import interrupts, space
from ragmem.runtime.parallel import mapper_for
from ragmem.schema import AgentOutput, Example
from ragmem.tracking import log_results, record_run, TrackedRun


class Steps:
    """The steps as plain function calls. Subclasses run them elsewhere (Prefect tasks)."""

    def load(self, cfg: RunConfig, dataset: Dataset | None = None) -> Dataset:
        """The run's data: as prepared (:mod:`ragmem.run.prepare`), else read now (a served flow's run)."""
        return dataset if dataset is not None else pipeline.load(cfg)

    def time_agent(self, agent: Any, batch: Sequence[Example], cfg: RunConfig, index: int,
                   on_output: Callable[[AgentOutput], None] | None = None) -> list[AgentOutput]:
        return pipeline.time_agent(agent, batch, cfg, on_output=on_output)

    def judge(self, judge: Any, batch: Sequence[Example], outputs: Sequence[AgentOutput], index: int) -> list:
        return pipeline.judge(judge, batch, outputs)

    def score(self, examples, outputs, judgements, components: pipeline.Components, cfg: RunConfig, mapper=None):
        mapper = mapper or self.mapper(cfg)
        return pipeline.score(self._table(examples, outputs, judgements, components, cfg, mapper), cfg, components, mapper)

    def score_chunk(self, examples, outputs, judgements, components: pipeline.Components, cfg: RunConfig,
                    index: int, mapper=None):
        """One chunk of a streamed run: its table and the families' values, without intervals
        (:mod:`ragmem.run.batching`)."""
        mapper = mapper or self.mapper(cfg)
        table = self._table(examples, outputs, judgements, components, cfg, mapper)
        try:
            return pipeline.scored(table, cfg, components, mapper)
        finally:  # the chunk's texts that do not repeat leave the keyword cache (memory flat across chunks)
            components.keywords.settle()

    @staticmethod
    def _table(examples, outputs, judgements, components: pipeline.Components, cfg: RunConfig, mapper):
        """The results table, the keyword sets it and the families read computed at once on ``mapper``
        first (the contexts' only when a family the run computes asks them)."""
        pipeline.prime_keywords(examples, outputs, components.keywords, mapper,
                                contexts=pipeline.primes_contexts(cfg, components))
        return pipeline.build_table(examples, outputs, judgements, components.keywords)

    def reads_chunks(self, cfg: RunConfig) -> bool:
        """Whether a streamed run's chunks are read where they are scored (Dask workers:
        ``score_bounds``) rather than in this process; here, never."""
        return False

    def score_bounds(self, bounds, cfg: RunConfig, folder: str, key: str, require_answer: bool):
        """The outcomes of chunks read where they are scored: only steps whose :meth:`reads_chunks` is
        true give them (the Prefect steps, on Dask)."""
        raise NotImplementedError("the plain steps read every chunk in this process (reads_chunks is false)")

    def mapper(self, cfg: RunConfig):
        """Where the text-heavy scoring work runs (:mod:`ragmem.runtime.parallel`): local processes."""
        return mapper_for(cfg.orchestration.workers)

    def log(self, run: TrackedRun, **record: Any) -> int:
        """An evaluation run's params, metrics, artifacts and traces (:func:`ragmem.tracking.record_run`)."""
        return record_run(run, **record)

    def log_results(self, run: TrackedRun, **results: Any) -> None:
        """Results of a sweep parent or a bench-memory run (:func:`ragmem.tracking.log_results`)."""
        log_results(run, **results)

    def children(self, fn: Callable[..., Any], items: list[tuple], max_parallel: int) -> list[tuple[str, Any]]:
        """``fn(*item)`` for every item, ``max_parallel`` at once; ``("ok", value)`` or
        ``("failed", "Type: message")`` per item, in order."""
        def guarded(item):
            try:
                return "ok", fn(*item)
            except space.DiskFull:  # not one child's failure: the sweep stops (the others wind down)
                raise
            except Exception as exc:  # one child's failure is recorded; the others go on
                return "failed", failure_message(exc)

        with ThreadPoolExecutor(max_workers=max_parallel, thread_name_prefix="ragmem-child") as pool:
            try:
                return list(pool.map(guarded, items))
            except BaseException:  # interrupted: the children wind down before the pool is joined
                interrupts.STOP.set()
                raise

    def load_conversations(self, path: str, conversations: list | None = None, dataset: str = "locomo") -> list:
        """The benchmark's conversations (``bench.dataset``): as prepared (:mod:`ragmem.run.prepare`), else read now."""
        return conversations if conversations is not None else bench_data.dataset(dataset).load(path)

    def memory_conversation(self, method: str, layer, conversation, qas, top_k: int, generate, dataset: str = "locomo"):
        return memory_bench.run_conversation(layer, conversation, qas, top_k, generate, dataset)

    def judge_answers(self, method: str, judge, answered, dataset: str = "locomo") -> list[float | None]:
        return memory_bench.judge_answers(judge, answered, bench_data.dataset(dataset))


PLAIN = Steps()
