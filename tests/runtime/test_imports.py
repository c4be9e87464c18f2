"""ragmem.runtime.imports: sacrebleu and MLflow load without the optional integrations ragmem never calls,
and those integrations still load when something imports them afterwards. Only a fresh interpreter
shows what a process loads first: those cases are in tests/e2e/test_fresh_process.py."""

import json
import sys

from ragmem.runtime.imports import lean_import


def test_a_module_already_imported_is_returned_as_it_is():
    assert lean_import("json") is json
    assert lean_import("sacrebleu.metrics") is sys.modules["sacrebleu.metrics"]
