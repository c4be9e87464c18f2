"""ragmem.runtime.imports: sacrebleu and MLflow load without the optional integrations ragmem never calls,
and those integrations still load when something imports them afterwards.

Each case runs in a fresh interpreter: what a process imported first decides what these check."""

import importlib.util
import json
import subprocess
import sys

import pytest

from ragmem.runtime.imports import lean_import, UNUSED

CASES = [  # what ragmem imports, what it does with it, the optional module's heavy dependency
    ("sacrebleu.metrics", "round(m.BLEU().corpus_score(['the cat sat on the mat'], [['the cat sat on the mat']]).score, 6)",
     "redis"),
    ("mlflow.store.tracking.sqlalchemy_store", "m.SqlAlchemyStore.__name__", "pygments"),
]


@pytest.mark.e2e  # a fresh interpreter per case: a subprocess
@pytest.mark.parametrize("module, use, heavy", CASES, ids=["sacrebleu", "mlflow-store"])
def test_a_package_loads_without_the_optional_module_which_still_loads_later(module, use, heavy):
    if importlib.util.find_spec(heavy) is None:
        pytest.skip(f"{heavy} is not installed: there is nothing to leave out")
    (optional,) = UNUSED[module.partition(".")[0]]
    code = (f"import json, sys\nfrom ragmem.runtime.imports import lean_import\nm = lean_import({module!r})\nvalue = {use}\n"
            f"during = {heavy!r} in sys.modules\nimport {optional}\n"
            f"print(json.dumps([value, during, {heavy!r} in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    value, during, after = json.loads(done.stdout.strip().splitlines()[-1])
    assert value == (100.0 if module.startswith("sacrebleu") else "SqlAlchemyStore")
    assert (during, after) == (False, True)


def test_a_module_already_imported_is_returned_as_it_is():
    assert lean_import("json") is json
    assert lean_import("sacrebleu.metrics") is sys.modules["sacrebleu.metrics"]
