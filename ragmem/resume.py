"""What ``--resume`` checks before it continues a run: the same settings, the same data, and a run
that is not still going.

A resume may change only settings that cannot change a result (how many calls run at once, how
outputs are batched, how many traces are kept); anything else is refused with one line naming the
settings that differ. A run still RUNNING is resumed only when the process that ran it is gone
(same host, pid no longer alive) — a run on another host cannot be checked and is refused.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from ragmem.errors import ConfigError

# settings a resume may change: none of them changes an answer, a verdict or a metric
RESUME_FREE = frozenset({"agent.concurrency", "agent.batch_size", "judge.max_concurrency",
                         "embeddings.max_concurrency", "generator.max_concurrency", "tracking.max_traces",
                         "agent.retry_backoff_s", "judge.retry_backoff_s", "embeddings.retry_backoff_s",
                         "judge.timeout_s", "embeddings.timeout_s", "generator.timeout_s"})


def host() -> str:
    return socket.gethostname()


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def run_is_dead(tags: dict[str, str]) -> bool | None:
    """For a RUNNING run: True when its process is gone, False when alive, None when it ran on
    another host (or recorded no pid) and cannot be checked from here."""
    pid = tags.get("ragmem.pid")
    if not pid or not pid.isdigit() or tags.get("ragmem.host") != host():
        return None
    return not process_alive(int(pid))


def settings_that_differ(started: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Dotted settings whose values differ between two flattened configs, except ``RESUME_FREE``."""
    keys = (started.keys() | now.keys()) - RESUME_FREE
    return sorted(k for k in keys if started.get(k) != now.get(k))


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
                          f"resume with the same settings (only concurrency, batch size, timeouts and "
                          f"max_traces may change)")
    if meta.get("data.sha256") != data_sha256:
        raise ConfigError(f"--resume {key}: the data changed since the run started (sha256 "
                          f"{str(meta.get('data.sha256'))[:12]} -> {data_sha256[:12]})")
