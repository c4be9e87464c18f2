"""Prefect flows: each reads like the pipeline it runs."""
