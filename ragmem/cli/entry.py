"""The ``ragmem`` command's first code: Ctrl+C and SIGTERM are one line from the first moment.

The console script runs :func:`main`, which sets SIGTERM to raise :class:`ragmem.errors.Terminated`
(a ``KeyboardInterrupt``, as Ctrl+C raises one) before anything slow happens, then imports the
command line (about 2 s: pandas, Prefect, MLflow) and runs it. An interrupt during that import ends
with ``interrupted`` and exit 130 (143 for SIGTERM), like an interrupt at any later moment
(:mod:`ragmem.exits`), never with Python's traceback of the import.
"""

from __future__ import annotations

import os
import sys

from ragmem.runtime import interrupts
from ragmem.runtime.interrupts import sigterm_raises


def main() -> None:
    sigterm_raises()
    try:
        from ragmem.cli.app import main as command  # the slow import, inside the interrupt's reach
        interrupts.check()  # a signal that landed in a finalizer of the import: its exception was lost
    except BaseException as exc:  # noqa: BLE001  (an interrupt, possibly wrapped by the import machinery)
        interrupt = interrupts.interrupt_in(exc)  # (a signal landing as a class is made comes out as
        # RuntimeError with the interrupt as its cause: a dataclass's __set_name__, threadpoolctl's at import)
        if interrupt is None:
            raise
        print("interrupted", file=sys.stderr)
        sys.stderr.flush()
        os._exit(interrupts.exit_code(interrupt))
    command()


if __name__ == "__main__":
    main()
