"""``python -m ragmem.cli``: the ``ragmem`` command (:func:`ragmem.cli.entry.main`)."""

from ragmem.cli.entry import main

main()
