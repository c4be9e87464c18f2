"""Prefect tasks (installed as ``ragmem.tasks``): the engine's steps run as tasks on batches.

A task per example would cost 3-6 ms of Prefect overhead each (too much at 100k examples), so every
task takes a batch. Large inputs are passed with ``quote()`` so Prefect does not walk them, and no
task caches (the inputs hold live objects: agents, judges). See :mod:`ragmem.tasks.steps`.
"""
