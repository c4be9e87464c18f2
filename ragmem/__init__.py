"""ragmem: evaluate RAG systems and agent memory layers, with every run tracked."""

__version__ = "0.1.0"


def evaluate(*args, **kwargs):
    """See :func:`ragmem.api.evaluate` (imported lazily so ``import ragmem`` stays cheap)."""
    from ragmem.api import evaluate as _evaluate

    return _evaluate(*args, **kwargs)


def dry_run(*args, **kwargs):
    """See :func:`ragmem.api.dry_run`."""
    from ragmem.api import dry_run as _dry_run

    return _dry_run(*args, **kwargs)


__all__ = ["evaluate", "dry_run", "__version__"]
