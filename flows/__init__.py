"""Prefect flows (installed as ``ragmem.flows``): each hands the run engine the Prefect driver."""
