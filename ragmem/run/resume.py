"""What ``--resume`` checks before it continues a run: the same settings, the same data, and a run
that is not still going.

A resume may change only settings that cannot change a result (how many calls run at once, how
outputs are batched, how many traces are kept); anything else is refused with one line naming the
settings that differ. A run still RUNNING is resumed only when the process that ran it is gone
(same host, pid no longer alive) — a run on another host cannot be checked and is refused.
"""

from __future__ import annotations

import json
from typing import Any

from ragmem.clients.endpoints import EndpointDown
from ragmem.config.loading import RunConfig
from ragmem.config.secrets import mask, scrub
from ragmem.config.settings import Settings
from ragmem.errors import ConfigError, failure_message
from ragmem.run import summary as summaries, traffic
from ragmem.run.journal import Journal
from ragmem.runtime import space
from ragmem.runtime.processes import host, process_alive, run_is_dead  # noqa: F401  (also here)
from ragmem.tracking.lifecycle import metric_name
from ragmem.tracking.runs import run_table

# settings a resume may change: none of them changes an answer, a verdict or a metric (an LLM
# endpoint's URL neither: its model is what the answers depend on, and judge.model is compared)
RESUME_FREE = frozenset({"judge.base_url", "embeddings.base_url", "generator.base_url",
                         "agent.concurrency", "agent.batch_size", "judge.max_concurrency",
                         "embeddings.max_concurrency", "generator.max_concurrency", "tracking.max_traces",
                         "tracking.table_copies_max_rows", "data.chunk_size",
                         "agent.retry_backoff_s", "judge.retry_backoff_s", "embeddings.retry_backoff_s",
                         "judge.timeout_s", "embeddings.timeout_s", "generator.timeout_s",
                         "run_name", "orchestration.server_idle_s"})


def settings_that_differ(started: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Dotted settings whose values differ between two flattened configs, except ``RESUME_FREE``; a
    setting added to ragmem after the run started (absent from ``started``) differs only when it is
    set to something else than its default."""
    keys = (started.keys() | now.keys()) - RESUME_FREE
    defaults = flat_config(Settings().model_dump(mode="json"))
    return sorted(k for k in keys if started.get(k) != now.get(k)
                  and not (k not in started and k in defaults and now.get(k) == defaults[k]))


def check_resumable(meta: dict[str, Any] | None, flat_config: dict[str, Any], data_sha256: str, key: str,
                    folder: str) -> None:
    if meta is None:
        raise ConfigError(f"--resume {key}: no journal of that run in {folder} (resume where the run was "
                          f"started, with the same RAGMEM_HOME)")
    differ = settings_that_differ(meta.get("config", {}), flat_config)
    if differ:
        shown = ", ".join(f"{k} ({meta['config'].get(k)!r} -> {flat_config.get(k)!r})" for k in differ[:6])
        more = f" and {len(differ) - 6} more" if len(differ) > 6 else ""
        raise ConfigError(f"--resume {key}: the config differs from the interrupted run's in {shown}{more}; "
                          f"resume with the same settings (only concurrency, batch size, timeouts, "
                          f"max_traces and the LLM endpoints' URLs may change)")
    if meta.get("data.sha256") != data_sha256:
        raise ConfigError(f"--resume {key}: the data changed since the run started (sha256 "
                          f"{str(meta.get('data.sha256'))[:12]} -> {data_sha256[:12]})")


def results_kept_local(cfg, journal, summary: dict[str, Any], exc: Exception):
    """The tracking store stopped answering after the work was done: the results stay on this machine."""
    path = journal.folder / "summary.json"
    summaries.write_json(path, summary)
    down = EndpointDown(f"tracking.uri {cfg.tracking_uri}: the tracking store stopped answering while the "
                                  f"results were logged ({failure_message(exc)[:160]}); the results are kept in {path} "
                                  f"and {journal.path}", during_run=True)
    down.ragmem_summary = summary  # type: ignore[attr-defined]  # (read by the command: cli.app)
    return down


def compared_config(cfg: RunConfig) -> dict[str, Any]:
    """:func:`flat_config` of a run's settings with its store and artifact root as they resolve (an
    absolute path, as ``ragmem serve`` writes them into a deployment, is the same store as the
    relative default a ``ragmem run`` in that folder resolves)."""
    flat = flat_config(cfg.raw)
    flat.update({"tracking.uri": scrub(cfg.tracking_uri), "tracking.artifact_root": cfg.artifact_root})
    return flat


def flat_config(config: dict[str, Any]) -> dict[str, Any]:
    """The settings a resume compares: every setting by dotted key, secrets masked, as JSON has them."""
    return json.loads(json.dumps(summaries.flatten(mask(config)), default=str))


# ---- sweeps -------------------------------------------------------------------------------------

def point_key(point: dict[str, Any]) -> str:
    """A grid point as the tag ``ragmem.run.sweep.point`` its child run carries."""
    return json.dumps(point, sort_keys=True, default=str)


def reopen_sweep(tracker, parent_id: str, meta: dict[str, Any], n_points: int) -> dict[str, tuple[str, str]]:
    """Check that the sweep ``parent_id`` may be resumed with this config and reopen it; returns its
    children by grid point: ``{point_key: (run_id, status)}``."""
    if tracker is None:
        raise ConfigError(f"--resume {parent_id}: a sweep is resumed from its MLflow runs; tracking.enabled must be true")
    check_resumable(Journal.read_meta_for(parent_id), meta["config"], meta["data.sha256"], parent_id,
                    str(Journal.folder_for(parent_id).parent))
    runs = tracker.client.search_runs([tracker.experiment_id(meta["experiment"])],
                                      filter_string=f"tags.mlflow.parentRunId = '{parent_id}'")
    children: dict[str, tuple[str, str]] = {}
    for run in runs:
        key = run.data.tags.get("ragmem.run.sweep.point")
        status = run.info.status
        if status == "RUNNING" and run_is_dead(run.data.tags):
            status = "DEAD"
        if key:
            children[key] = (run.info.run_id, status)
    if len(children) == n_points and all(s == "FINISHED" for _, s in children.values()):
        raise ConfigError(f"--resume {parent_id}: every one of the {n_points} configurations already finished")
    tracker.reopen(parent_id, allow_finished=True)
    return children


_COUNTS = ("n_examples", "n_agent_errors", "n_judge_errors", "n_unlabelled", "n_errors", "n_traces")


def finished_child(tracker, run_id: str) -> dict[str, Any]:
    """A child finished before the sweep was interrupted: its metrics and per-example table, read back."""
    metrics = {metric_name(k): v for k, v in tracker.client.get_run(run_id).data.metrics.items()}
    kept = {k: v for k, v in metrics.items()
            if k not in _COUNTS and not k.startswith("undefined_") and not k.endswith(("_ci_low", "_ci_high"))}
    return {"metrics": kept, "table": run_table(tracker.client, run_id), "index_builds": 0}


def resolve_key(ref: str, flag: str = "--resume") -> str:
    """The run a ``--resume`` names: its full id (or ``untracked-...`` key), given whole or as a
    unique prefix, as ``compare``, ``report`` and ``--baseline`` take them (the 8 characters a run
    prints). Looked up among the journals of this ragmem home; nothing is created.

    A prefix that names no journal, or more than one, is a ConfigError of one line."""
    ref = ref.strip()
    if Journal.has_meta(ref):
        return ref
    folder = Journal.folder_for(ref).parent
    if len(ref) < 4:
        raise ConfigError(f"{flag} {ref!r}: expected a run id or a prefix of at least 4 characters")
    found = sorted(p.name for p in folder.iterdir() if p.name.startswith(ref) and Journal.has_meta(p.name)) \
        if folder.is_dir() else []
    if not found:
        raise ConfigError(f"{flag} {ref}: no run of this ragmem home ({folder}) starts with it (resume where the run "
                          f"was started, with the same RAGMEM_HOME)")
    if len(found) > 1:
        raise ConfigError(f"{flag} {ref}: more than one run starts with it ({', '.join(found[:3])}); give more characters")
    return found[0]


def check_resume(cfg, dataset, resume: str):
    """The journal of ``resume`` (a full key: :func:`resolve_key`) exists and was written for these
    settings and this data (before any work: the command line calls it before starting the flow,
    the engine again); the Journal, with the journals of chunks its Dask workers answered added
    (:meth:`Journal.absorb_parts`: the run is not live). A refused resume creates nothing."""
    check_resumable(Journal.read_meta_for(resume), compared_config(cfg), dataset.sha256, resume,
                    str(Journal.folder_for(resume).parent))
    journal = Journal(resume, resume=True)
    journal.absorb_parts()
    return journal


def stopped(exc: BaseException, journal: Journal, kept: int, total: int, cfg: RunConfig) -> BaseException:
    """What stopped a run, with its progress for the resume hint; a full disk as the
    :class:`ragmem.runtime.space.DiskFull` that names its path (SQLite's error does not)."""
    try:
        journal.close()
    except OSError:  # (its last fsync, on a full disk: named below)
        pass
    written_back = traffic.write_back(cfg)  # (the trace store, when the assessments go back to it)
    stopped = space.as_disk_full(exc, space.places(cfg.tracking_uri, cfg.artifact_root, written_back)) or exc
    stopped.ragmem_progress = (journal.key, kept + journal.written, total)  # type: ignore[attr-defined]
    return stopped
