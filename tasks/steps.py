"""The engine's steps as Prefect tasks: :class:`PrefectSteps` is the driver the flows hand to
:mod:`ragmem.run.engine`; each method submits the same plain step as a task (named, batched, visible in
the Prefect UI). Only the logging tasks retry, and only on transient store errors (a retried log
writes nothing twice: see :func:`ragmem.tracking.log_results`)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote

from ragmem import tracking
from ragmem.config.loading import RunConfig
from ragmem.data.loaders import Dataset
from ragmem.run import engine
from ragmem.run.batching import score_bounds
from ragmem.runtime import interrupts, space
from ragmem.runtime.parallel import chunks, local_workers
from ragmem.schema import AgentOutput, Example

PLAIN = engine.PLAIN


def _transient(task_, task_run, state) -> bool:
    """Retry a logging task only when the store was busy or unreachable."""
    try:
        state.result()
    except Exception as exc:
        return tracking.is_transient(exc)
    return False


_LOG_RETRIES: dict[str, Any] = {"retries": 2, "retry_delay_seconds": 2, "retry_condition_fn": _transient}


@task(name="load", cache_policy=NO_CACHE)
def load(cfg: RunConfig, dataset: Dataset | None = None) -> Dataset:
    """The run's data, as prepared before the flow started (:mod:`ragmem.run.prepare`), else read now
    (a served flow's run); a bad record fails the run with file, record and field."""
    return PLAIN.load(cfg, dataset)


@task(name="time-agent", cache_policy=NO_CACHE, task_run_name="time-agent-batch-{index}")
def time_agent(agent: Any, batch: Sequence[Example], cfg: RunConfig, index: int, on_output=None) -> list[AgentOutput]:
    """Call (or replay) the agent for each example of the batch, timed, failures recorded, each
    output journaled as soon as it is known (``on_output``)."""
    return PLAIN.time_agent(agent, batch, cfg, index, on_output)


@task(name="judge", cache_policy=NO_CACHE, task_run_name="judge-batch-{index}")
def judge(judge_: Any, batch: Sequence[Example], outputs: Sequence[AgentOutput], index: int) -> list:
    """One judgement per example (None where the agent call failed)."""
    return PLAIN.judge(judge_, batch, outputs, index)


@task(name="metrics", cache_policy=NO_CACHE)
def score(examples, outputs, judgements, components, cfg: RunConfig):
    """Per-example table with metric columns, and the aggregates (LLM metrics batched here, the
    text-heavy work on local processes)."""
    return PLAIN.score(examples, outputs, judgements, components, cfg)


@task(name="score-chunk", cache_policy=NO_CACHE, task_run_name="score-chunk-{index}")
def score_chunk(examples, outputs, judgements, components, cfg: RunConfig, index: int):
    """One chunk of a streamed run (data.chunk_size): its table and its metric values."""
    return PLAIN.score_chunk(examples, outputs, judgements, components, cfg, index)


@task(name="chunk", cache_policy=NO_CACHE, task_run_name="chunk-{index}")
def chunk(payload: "Payload", index: int):
    """One chunk of a streamed run on a Dask worker: read from its files by its bounds, answered,
    judged, scored, its rows and outputs written to the run folder; its statistics returned."""
    return score_bounds(*payload.value)


class Payload:
    """A task argument Prefect neither walks through nor resolves. ``quote()`` does that on the
    thread pool, but reaches a Dask worker still wrapped (as a 1-tuple), so what goes to Dask is
    wrapped in this instead."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


@task(name="score-batch", cache_policy=NO_CACHE, task_run_name="{name}-batch-{index}")
def score_batch(fn: Callable[..., list], payload: Payload, name: str, index: int) -> list:
    """The text-heavy scoring of one batch (``fn(part, *args)``, see :mod:`ragmem.runtime.parallel`)."""
    part, args = payload.value
    return fn(part, *args)


class PrefectMapper:
    """Scoring batches as Prefect tasks on the flow's task runner (prefect-dask's DaskTaskRunner):
    two batches per Dask worker (each task run costs Prefect's engine on the worker a fixed
    overhead, so fewer, larger batches), none under ``MIN_BATCH`` items."""

    name = "dask"
    MIN_BATCH = 200

    def __init__(self, workers: int):
        self.workers = workers

    @classmethod
    def for_config(cls, cfg: RunConfig) -> "PrefectMapper":
        orchestration = cfg.orchestration
        if not orchestration.dask_address:
            return cls(orchestration.dask_workers or local_workers("auto"))
        from distributed import Client

        with Client(orchestration.dask_address, timeout=30) as client:  # how many workers it has now
            return cls(max(1, len(client.scheduler_info().get("workers", {}))))

    def map(self, fn: Callable[..., list], items: Sequence[Any], *args: Any) -> list:
        parts = chunks(items, max(1, min(2 * self.workers, len(items) // self.MIN_BATCH)))
        futures = [score_batch.submit(fn, Payload((part, args)), fn.__name__.replace("_", "-"), i)
                   for i, part in enumerate(parts)]
        out: list = []
        for future in futures:
            out.extend(future.result())
        return out


@task(name="log-run", cache_policy=NO_CACHE, **_LOG_RETRIES)
def log_run(run: tracking.TrackedRun, record: dict[str, Any]) -> int:
    """Agent-call traces, params, metrics, config, summary, per-example table, plots, journal."""
    return PLAIN.log(run, **record)


@task(name="log-results", cache_policy=NO_CACHE, **_LOG_RETRIES)
def log_results(run: tracking.TrackedRun, results: dict[str, Any]) -> None:
    """A sweep parent's or a bench-memory run's results."""
    PLAIN.log_results(run, **results)


@task(name="evaluate-config", cache_policy=NO_CACHE, task_run_name="child-{index}")
def child(fn: Callable[..., Any], item: Payload, index: int) -> Any:
    """Evaluate one grid point into its (already created) child run; raises when it fails."""
    return fn(*item.value)


@task(name="load-conversations", cache_policy=NO_CACHE)
def load_conversations(path: str, conversations: list | None = None, dataset: str = "locomo") -> list:
    """Every conversation of the benchmark's data (LoCoMo: zip, folder, file or locomo10.json;
    LongMemEval: one per question), as prepared before the flow started, else read now."""
    return PLAIN.load_conversations(path, conversations, dataset)


@task(name="memory-conversation", cache_policy=NO_CACHE, task_run_name="{method}-{conversation.id}")
def memory_conversation(method: str, layer, conversation, qas, top_k: int, generate, dataset: str = "locomo"):
    """Ingest the conversation session by session, then answer its questions from recalled memories."""
    return PLAIN.memory_conversation(method, layer, conversation, qas, top_k, generate, dataset)


@task(name="memory-judge", cache_policy=NO_CACHE, task_run_name="judge-{method}")
def judge_answers(method: str, judge_, answered, dataset: str = "locomo") -> list[float | None]:
    """The judge's verdict per answered question (None where the call or the judge failed)."""
    return PLAIN.judge_answers(method, judge_, answered, dataset)


class PrefectSteps(engine.Steps):
    """Every step as a Prefect task; sweep children run on the flow's task runner, and so do the
    scoring batches with ``orchestration.task_runner: dask``."""

    def load(self, cfg, dataset=None):
        return load(cfg, quote(dataset))

    def time_agent(self, agent, batch, cfg, index, on_output=None):
        return time_agent(quote(agent), quote(batch), cfg, index, quote(on_output))

    def judge(self, judge_, batch, outputs, index):
        return judge(quote(judge_), quote(batch), quote(outputs), index)

    def score(self, examples, outputs, judgements, components, cfg):
        if cfg.orchestration.task_runner == "dask":
            # in the flow itself: its scoring batches are submitted from here to Dask (a task
            # submitted from inside a task would carry that task's context, clients included)
            return PLAIN.score(examples, outputs, judgements, components, cfg, PrefectMapper.for_config(cfg))
        return score(quote(examples), quote(outputs), quote(judgements), quote(components), cfg)

    def score_chunk(self, examples, outputs, judgements, components, cfg, index):
        if cfg.orchestration.task_runner == "dask":  # (see score)
            return PLAIN.score_chunk(examples, outputs, judgements, components, cfg, index, PrefectMapper.for_config(cfg))
        return score_chunk(quote(examples), quote(outputs), quote(judgements), quote(components), cfg, index)

    def reads_chunks(self, cfg):
        return cfg.orchestration.task_runner == "dask"

    def score_bounds(self, bounds, cfg, folder, key, require_answer):
        """Each chunk's bounds to a Dask worker (:func:`chunk`), never its rows; the outcomes in the
        chunks' order, two chunks a worker in flight (what has come back waits for its turn)."""
        window = 2 * PrefectMapper.for_config(cfg).workers
        futures: dict[int, Any] = {}
        try:
            for index in range(len(bounds)):
                while len(futures) < window and index + len(futures) < len(bounds):
                    at = index + len(futures)
                    futures[at] = chunk.submit(Payload((bounds[at], cfg, folder, at, key, require_answer)), at)
                yield futures.pop(index).result()
        finally:  # stopped (Ctrl+C, a failed chunk): the chunks not started are not (a cluster's
            for future in futures.values():  # running one finishes; its answers are journaled)
                future.wrapped_future.cancel()

    def log(self, run, **record):
        return log_run(run, quote(record))

    def log_results(self, run, **results):
        log_results(run, quote(results))

    def children(self, fn, items, max_parallel):
        futures = [child.submit(fn, Payload(item), i) for i, item in enumerate(items)]
        outcomes = []
        for future, item in zip(futures, items):
            try:
                future.wait()
            except BaseException:  # interrupted: the children on the runner's threads wind down
                interrupts.STOP.set()
                raise
            try:
                outcome = future.result()
                outcomes.append(("ok", outcome))
            except space.DiskFull:  # not the child's own failure: the sweep stops (the others wind down)
                interrupts.STOP.set()
                raise
            except Exception as exc:  # the child's own exception, recorded as its reason
                outcome = exc
                outcomes.append(("failed", engine.failure_message(exc)))
            settle = getattr(fn, "settle", None)  # ran on another process (Dask): announced here, once
            if settle is not None:
                settle(item[0], item[1], outcome)
        return outcomes

    def load_conversations(self, path, conversations=None, dataset="locomo"):
        return load_conversations(path, quote(conversations), dataset)

    def memory_conversation(self, method, layer, conversation, qas, top_k, generate, dataset="locomo"):
        return memory_conversation(method, quote(layer), quote(conversation), quote(qas), top_k, quote(generate), dataset)

    def judge_answers(self, method, judge_, answered, dataset="locomo"):
        return judge_answers(method, quote(judge_), quote(answered), dataset)
