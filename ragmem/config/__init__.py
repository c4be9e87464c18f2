"""One validated config (layer config: imports data, metrics, prompts and below).

The typed schema of every setting (settings, with its sections and sweep_settings), YAML files,
--set and API overrides merged into one RunConfig (loading), and which values are secret and how
they are masked (secrets).
"""
