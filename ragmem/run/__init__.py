"""The engine (layer run: imports every core layer below it; nothing of Prefect or the CLI).

One preparation of a run (prepare), the steps as functions (pipeline) and as plain calls
(plain_steps), the order of the steps and the run's lifecycle (engine), the agent and judge batch
by batch and a large dataset chunk by chunk (batching), what a run records about itself (summary),
the journal of agent outputs (journal), sweeps and the judge sweep, gates, resume, dry runs,
relabelling, and the machine checked before any work (environment).
"""
