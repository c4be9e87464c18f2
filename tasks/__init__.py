"""Prefect tasks: thin wrappers over ``ragmem.pipeline`` that work on batches of examples.

A task per example would cost 3-6 ms of Prefect overhead each (too much at 100k examples), so every
task takes a batch. Large inputs are passed with ``quote()`` so Prefect does not walk them, and no
task caches (the inputs hold live objects: agents, judges).
"""
