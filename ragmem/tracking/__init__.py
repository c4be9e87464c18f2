"""Every MLflow call ragmem makes lives in this package, and one context manager owns a run's lifecycle.

The client is always given run ids explicitly (``MlflowClient``): MLflow's active run is per thread,
and Prefect runs tasks on worker threads, where ``mlflow.log_metric`` would silently open an orphan
run. Default store: ``sqlite:///mlruns/mlflow.db`` (MLflow 3 refuses a bare ``./mlruns`` file store)
with artifacts under ``mlruns/artifacts/<experiment>``, passed explicitly at experiment creation
(MLflow otherwise stores the working directory of whoever created the experiment).

Lifecycle: :func:`tracked_run` ends every run: FINISHED when its block ends, FAILED with a
``ragmem.error`` tag when the block raises, KILLED on Ctrl+C or SIGTERM. Runs, sweep parents and
children, and bench-memory parents and methods all go through it. The one other ending, for sweep
children created up front that never reached their own block (their task died, or the sweep was
interrupted), is :func:`end_unfinished`, with the same helper. No other module sets a status.

Importing or using this module changes nothing in the process: no environment variable, no logger
level, no global tracking URI (every call goes through a client of the run's store, traces included:
:mod:`ragmem.tracking.agent_traces`).
"""

from __future__ import annotations

from ragmem.tracking.lifecycle import end_unfinished, log_results, tracked_run, TrackedRun
from ragmem.tracking.record import record_labels, record_pairwise, record_run, record_testset
from ragmem.tracking.store import is_transient, prepare_local_store, Tracker

__all__ = ["Tracker", "TrackedRun", "end_unfinished", "is_transient", "log_results", "prepare_local_store",
           "record_labels", "record_pairwise", "record_run", "record_testset", "tracked_run"]
