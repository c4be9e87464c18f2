"""The idle watcher of the shared local Prefect server: ``python -m ragmem.orchestration.watcher FOLDER
DEFAULT_IDLE_S``, spawned (detached) by the server's start (:mod:`ragmem.orchestration.server`); it
stops the server once idle (:func:`ragmem.orchestration.idle.watch`) and says so in the server's log."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ragmem.orchestration import idle, server


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    default = None if len(argv) < 2 or argv[1] == "none" else float(argv[1])
    try:
        why = idle.watch(folder, stop=lambda: server.stop_managed_server(quiet_watcher=True),
                         running=lambda: server.running_server() is not None, default_idle_s=default)
    except server.StillRunning as exc:  # the log says so, never "stopped"
        why = f"could not stop the server: {exc}"
    with open(folder / "prefect-server.log", "a", encoding="utf-8") as log:
        log.write(f"ragmem | {time.strftime('%Y-%m-%d %H:%M:%S')} idle watcher: {why}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
