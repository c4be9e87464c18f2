"""A claim held in the tracking store: one holder at a time for a name (a deployment's stream of
windows of traffic, :mod:`ragmem.run.windows`), on any store MLflow serves (a SQL database, a
tracking server), between processes and hosts that share it.

The store has no compare-and-set, but an experiment's name is unique in it: creating an experiment
whose name exists fails, atomically, for every caller but one. A claim is therefore the experiment
``ragmem-claims/<name>/<generation>``; its tags say who holds it (host, pid and the process's start
time, the run once it has one). To claim, a process reads the latest generation: none, or released
(the holder ended: its experiment is tagged and deleted, which hides it from the UI), or held by a
process that is gone (same host: the pid is not running, or runs another process) -> it creates the
next generation; exactly one of several concurrent claimers succeeds, the others learn who won.
A holder on another host cannot be checked from here: it holds until it releases (say so, with its
host and pid).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass
from typing import Any

from ragmem.runtime.processes import host, process_identity, run_is_dead

PREFIX = "ragmem-claims"
HOST, PID, STARTED, SINCE, RUN, RELEASED = ("ragmem.host", "ragmem.pid", "ragmem.pid_started", "ragmem.claim.since",
                                            "ragmem.claim.run", "ragmem.claim.released")


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a claim: its generation's experiment and tags."""

    generation: int
    experiment_id: str
    tags: dict[str, str]
    deleted: bool

    @property
    def released(self) -> bool:
        return RELEASED in self.tags or self.deleted

    def gone(self) -> bool:
        """Whether the holder's process is known to be gone (a later process under its pid is another)."""
        dead = run_is_dead(self.tags)
        if dead is None or dead:
            return bool(dead)
        started = self.tags.get(STARTED)
        return bool(started) and process_identity(int(self.tags[PID])) != started

    def said(self) -> str:
        """``pid 4242 on host h since 2026-12-06T12:00:01Z (run 3f2a...)``."""
        run = self.tags.get(RUN)
        return (f"pid {self.tags.get(PID, '?')} on host {self.tags.get(HOST, '?')} since {self.tags.get(SINCE, '?')}"
                + (f" (run {run})" if run else ""))


class Claim:
    """The claim on ``name`` in the store of ``client`` (an ``MlflowClient``)."""

    def __init__(self, client: Any, name: str, artifact_location: str | None = None):
        if not re.fullmatch(r"[\w.-]+", name):
            raise ValueError(f"a claim's name is letters, digits, '_', '.', '-': got {name!r}")
        self.client, self.name, self.location = client, name, artifact_location
        self.held: Holder | None = None

    def _latest(self) -> Holder | None:
        from mlflow.entities import ViewType  # (mlflow: imported by the tracker already)

        found = self.client.search_experiments(view_type=ViewType.ALL, max_results=20,
                                               filter_string=f"name LIKE '{PREFIX}/{self.name}/%'",
                                               order_by=["creation_time DESC"])
        best = None
        for e in found:
            tail = e.name.rsplit("/", 1)[-1]
            if tail.isdigit() and (best is None or int(tail) > best.generation):
                best = Holder(int(tail), e.experiment_id, dict(e.tags), e.lifecycle_stage == "deleted")
        return best

    def take(self) -> Holder | None:
        """Claim it: ``None`` when this process now holds it, else who does (held and alive, or won
        by another claimer at the same moment)."""
        latest = self._latest()
        if latest is not None and not latest.released and not latest.gone():
            return latest
        generation = 0 if latest is None else latest.generation + 1
        pid = os.getpid()
        tags = {HOST: host(), PID: str(pid), STARTED: process_identity(pid) or "",
                SINCE: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
        try:
            experiment_id = self.client.create_experiment(f"{PREFIX}/{self.name}/{generation}", tags=tags,
                                                          artifact_location=self.location)
        except Exception as exc:  # the name exists: another claimer created it first
            if "RESOURCE_ALREADY_EXISTS" not in str(getattr(exc, "error_code", "")) and "already exists" not in str(exc):
                raise
            won = self._latest()
            return won if won is not None else latest
        self.held = Holder(generation, experiment_id, tags, False)
        return None

    def note_run(self, run_id: str) -> None:
        """Name the run that holds it (for the line a refused claimer prints)."""
        if self.held is not None:
            self.client.set_experiment_tag(self.held.experiment_id, RUN, run_id)

    def release(self) -> None:
        """Give it up: tagged released and deleted (hidden from the UI; the name stays taken, so
        generations only grow)."""
        if self.held is None:
            return
        held, self.held = self.held, None
        self.client.set_experiment_tag(held.experiment_id, RELEASED,
                                       dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
        self.client.delete_experiment(held.experiment_id)
