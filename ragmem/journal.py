"""ragmem's working folder and the journal of agent outputs a run writes as it goes.

Each batch's outputs are appended to ``$RAGMEM_HOME/runs/<run id>/agent_outputs.jsonl`` as soon as
the batch is answered (paid-for answers are on disk before the next call), and the file is logged
as an artifact of the run at the end.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

from ragmem.schema import AgentOutput

JOURNAL_NAME = "agent_outputs.jsonl"


def ragmem_home() -> Path:
    """``$RAGMEM_HOME``, default ``.ragmem`` in the working directory."""
    return Path(os.environ.get("RAGMEM_HOME", ".ragmem")).resolve()


class Journal:
    """Append-only JSON lines of :class:`AgentOutput`, one file per run (``run_id``, or a fresh id
    for an untracked run)."""

    def __init__(self, run_id: str | None):
        self.path = ragmem_home() / "runs" / (run_id or f"untracked-{uuid.uuid4().hex[:12]}") / JOURNAL_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)

    def append(self, outputs: Sequence[AgentOutput]) -> None:
        with open(self.path, "a", encoding="utf-8") as out:
            for output in outputs:
                out.write(json.dumps(asdict(output), ensure_ascii=False) + "\n")
