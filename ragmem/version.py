"""ragmem's version: logged with every run (``ragmem.version``), printed by ``ragmem --version``, and
the package's own (pyproject.toml reads it from here)."""

__version__ = "0.1.0"
