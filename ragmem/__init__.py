"""ragmem: evaluate RAG systems and agent memory layers, with every run tracked."""

from ragmem.version import __version__


def evaluate(*args, **kwargs):
    """See :func:`ragmem.api.evaluate` (imported lazily so ``import ragmem`` stays cheap)."""
    from ragmem.api import evaluate as _evaluate  # slow import (pandas, the engine): not on `import ragmem`

    return _evaluate(*args, **kwargs)


def dry_run(*args, **kwargs):
    """See :func:`ragmem.api.dry_run`."""
    from ragmem.api import dry_run as _dry_run  # slow import (pandas, the engine)

    return _dry_run(*args, **kwargs)


__all__ = ["evaluate", "dry_run", "__version__"]
