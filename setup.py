"""The package list, found rather than written by hand (a hand-written list left ragmem.tracking out
of the wheel). Everything else is in pyproject.toml.

``[tool.setuptools.packages.find]`` cannot be used alone: it finds packages by folder, and flows/ and
tasks/ are top-level folders that install as ``ragmem.flows`` and ``ragmem.tasks`` (the
``package-dir`` mapping in pyproject.toml), so they are added here by name.
"""

from setuptools import find_packages, setup

setup(packages=find_packages(include=["ragmem", "ragmem.*"]) + ["ragmem.flows", "ragmem.tasks"])
