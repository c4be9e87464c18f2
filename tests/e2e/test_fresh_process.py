"""What only a fresh interpreter shows: the optional integrations ragmem never calls stay unloaded
(and still load later), jieba prints nothing on its first import, ``flows`` and ``tasks`` install
under the ragmem namespace, and a command ends after its threads and exit handlers with its own code.
Each case runs ``python`` in a subprocess: what a process imported first decides what it checks."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from ragmem.runtime.imports import UNUSED
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e


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


@pytest.mark.e2e  # a fresh interpreter: the first import's output is what is checked
def test_jieba_prints_nothing(capfd):
    import subprocess, sys

    code = "from ragmem.text.keywords import KeywordExtractor; print(sorted(KeywordExtractor()('向量检索')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stderr == ""


@pytest.mark.e2e  # a fresh interpreter outside the checkout sees only what is installed
def test_flows_and_tasks_install_under_the_ragmem_namespace(tmp_path):
    code = ("import importlib.util, ragmem.flows.evaluate, ragmem.tasks.steps; "
            "print(importlib.util.find_spec('flows'), importlib.util.find_spec('tasks'), "
            "ragmem.flows.evaluate.__file__, ragmem.tasks.steps.__file__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "None", str(ROOT / "flows" / "evaluate.py"), str(ROOT / "tasks" / "steps.py")]


@pytest.mark.e2e  # the process's own end (os._exit): a subprocess
def test_the_command_ends_after_threads_and_exit_handlers_with_its_code(tmp_path):
    """``ragmem.exits.leave``: a non-daemon thread finishes, every atexit handler runs, unflushed
    output is written, and the process exits with the command's code (skipping only the teardown)."""
    import subprocess
    import sys

    script = tmp_path / "leave.py"
    script.write_text(
        "import atexit, pathlib, sys, threading, time\n"
        "from ragmem.exits import leave\n"
        f"folder = pathlib.Path({str(tmp_path)!r})\n"
        "atexit.register(lambda: (folder / 'handler').write_text('ran'))\n"
        "def work():\n"
        "    time.sleep(0.3)  # still working when the command ends\n"
        "    (folder / 'thread').write_text('done')\n"
        "threading.Thread(target=work).start()\n"
        "print('no newline, not flushed', end='')\n"
        "leave(7)\n"
        "print('never')\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 7, done.stderr
    assert done.stdout == "no newline, not flushed"
    assert (tmp_path / "thread").read_text() == "done" and (tmp_path / "handler").read_text() == "ran"
