"""The flows' task runner, from ``orchestration.task_runner``.

- ``threads`` (default): Prefect's thread pool in this process; the scoring batches run on a local
  process pool (``orchestration.workers``, see :mod:`ragmem.runtime.parallel`);
- ``dask``: prefect-dask's ``DaskTaskRunner``. The scoring batches (and a sweep's children) are
  Prefect tasks on the Dask workers: an existing cluster (``orchestration.dask_address``, e.g.
  ``tcp://10.0.0.5:8786``), else a ``LocalCluster`` started for the flow run and stopped after it
  (``orchestration.dask_workers`` processes, one thread each, bound to 127.0.0.1, no dashboard).
"""

from __future__ import annotations

from typing import Any

from prefect.task_runners import ThreadPoolTaskRunner

from ragmem.runtime.parallel import local_workers


def task_runner_for(config: dict[str, Any], threads: int | None = None):
    """The task runner a flow of this (resolved) config runs on; ``threads`` sizes the thread pool."""
    orchestration = config.get("orchestration") or {}
    if orchestration.get("task_runner") != "dask":
        return ThreadPoolTaskRunner(max_workers=threads)
    from prefect_dask import DaskTaskRunner

    if orchestration.get("dask_address"):
        return DaskTaskRunner(address=orchestration["dask_address"])
    from prefect.settings import PREFECT_LOGGING_LEVEL

    workers = orchestration.get("dask_workers") or local_workers("auto")
    # the worker processes log as this process does (ragmem run: WARNING unless --verbose)
    env = {"PREFECT_LOGGING_LEVEL": str(PREFECT_LOGGING_LEVEL.value())}
    return DaskTaskRunner(cluster_class="ragmem.flows.runners.local_cluster",
                          cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "processes": True,
                                          "host": "127.0.0.1", "dashboard_address": None, "env": env,
                                          "preload": ["ragmem.flows.runners"]})


def local_cluster(**kwargs: Any):
    """``distributed.LocalCluster(**kwargs)`` without the garbage-collection diagnosis its scheduler
    turns on in this process: that is a Python ``gc`` callback, and a Ctrl+C landing while it ran
    was swallowed ("Exception ignored in ... GCDiagnosis._gc_callback", KeyboardInterrupt) and the
    run went on to the end (seen in CI). The scheduler's own close then finds it off, as it expects."""
    from distributed import LocalCluster
    from distributed.gc import disable_gc_diagnosis

    cluster = LocalCluster(**kwargs)
    disable_gc_diagnosis(force=True)
    return cluster


def dask_setup(worker: Any) -> None:
    """Each LocalCluster worker's start (this module is its Dask preload).

    - The worker leaves the terminal's process group: a terminal sends Ctrl+C to its whole
      foreground group, and each worker printed Dask's warnings or a ``CommClosedError`` traceback
      before ragmem's one line. The flow stops the workers itself when it ends, interrupted or not.
      (Ignoring SIGINT while the cluster started lost a Ctrl+C pressed meanwhile: the cluster starts
      with the first scoring batch, well into the run.)
    - Unless ``-v``, it logs nothing but a critical error: when a run ends early (Ctrl+C, a failed
      step) the scheduler closes under the workers, and each logged the cancelled batches and a
      heartbeat traceback after ragmem's own line. What fails in a batch reaches the flow anyway.
    """
    import logging
    import os

    if hasattr(os, "setpgid"):
        os.setpgid(0, 0)
    if os.environ.get("PREFECT_LOGGING_LEVEL", "").upper() == "WARNING":  # ragmem run without -v
        logging.getLogger("distributed").setLevel(logging.CRITICAL)
