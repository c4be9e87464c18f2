"""The flows' task runner, from ``orchestration.task_runner``.

- ``threads`` (default): Prefect's thread pool in this process; the scoring batches run on a local
  process pool (``orchestration.workers``, see :mod:`ragmem.parallel`);
- ``dask``: prefect-dask's ``DaskTaskRunner``. The scoring batches (and a sweep's children) are
  Prefect tasks on the Dask workers: an existing cluster (``orchestration.dask_address``, e.g.
  ``tcp://10.0.0.5:8786``), else a ``LocalCluster`` started for the flow run and stopped after it
  (``orchestration.dask_workers`` processes, one thread each, bound to 127.0.0.1, no dashboard).
"""

from __future__ import annotations

from typing import Any

from prefect.task_runners import ThreadPoolTaskRunner


def task_runner_for(config: dict[str, Any], threads: int | None = None):
    """The task runner a flow of this (resolved) config runs on; ``threads`` sizes the thread pool."""
    orchestration = config.get("orchestration") or {}
    if orchestration.get("task_runner") != "dask":
        return ThreadPoolTaskRunner(max_workers=threads)
    from prefect_dask import DaskTaskRunner

    if orchestration.get("dask_address"):
        return DaskTaskRunner(address=orchestration["dask_address"])
    from prefect.settings import PREFECT_LOGGING_LEVEL

    from ragmem.parallel import local_workers

    workers = orchestration.get("dask_workers") or local_workers("auto")
    # the worker processes log as this process does (ragmem run: WARNING unless --verbose)
    env = {"PREFECT_LOGGING_LEVEL": str(PREFECT_LOGGING_LEVEL.value())}
    return DaskTaskRunner(cluster_class="ragmem.flows.runners.local_cluster",
                          cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "processes": True,
                                          "host": "127.0.0.1", "dashboard_address": None, "env": env,
                                          "preload": ["ragmem.flows.runners"]})


def local_cluster(**kwargs: Any):
    """``distributed.LocalCluster(**kwargs)`` whose processes never see the terminal's Ctrl+C.

    They share the terminal's process group, so a Ctrl+C reached every worker too, and each printed
    Dask's warnings or a ``CommClosedError`` traceback before ragmem's one line. SIGINT is ignored
    while the cluster starts, and a process started with a signal ignored keeps it ignored (Python
    and asyncio install no handler then); this process's handler is put back as soon as the cluster
    is up, and the flow stops the workers itself when it ends, interrupted or not. The main thread
    holds SIGINT blocked meanwhile, so a Ctrl+C pressed during the start waits and is then
    delivered here (unless one of Prefect's threads received it: then press it again).
    """
    import signal
    import threading

    from distributed import LocalCluster

    if threading.current_thread() is not threading.main_thread():
        return LocalCluster(**kwargs)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return LocalCluster(**kwargs)
    finally:
        signal.signal(signal.SIGINT, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def dask_setup(worker: Any) -> None:
    """Each LocalCluster worker's start (this module is its Dask preload): the batches a Ctrl+C
    cancels end quietly (Dask logs a warning for each running one as the cluster closes)."""
    import logging

    logging.getLogger("distributed.worker.state_machine").setLevel(logging.ERROR)
