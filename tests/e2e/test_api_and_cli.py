"""On the same data and home, ``ragmem run ragmem.yaml`` and ``ragmem.evaluate`` give the same numbers:
the API reads the home's config as the command line does (a new user saw pass_rate 0.60 on the
command line and 0.30 from the API: the starter's threshold 0.5 against the default 0.7)."""

from __future__ import annotations

import json
import math

import pytest

import ragmem
from tests.conftest import run_cli

pytestmark = pytest.mark.e2e


def test_the_command_line_and_the_api_give_the_same_metrics_in_one_home(prefect_env, tmp_path, monkeypatch):
    home = tmp_path / "home"
    made = run_cli(["init", str(home)], env=prefect_env)
    assert made.returncode == 0, made.stderr
    env = {**prefect_env, "RAGMEM_HOME": str(home / ".ragmem")}
    done = run_cli(["run", "ragmem.yaml", "-o", "s.json"], env=env, cwd=home)
    assert done.returncode == 0, done.stderr
    cli = json.loads((home / "s.json").read_text())["metrics"]
    monkeypatch.chdir(home)
    monkeypatch.setenv("RAGMEM_HOME", str(home / ".ragmem"))
    for data in (None, "data/examples.jsonl"):  # the config's data, or the same file named
        api = ragmem.evaluate(data, track=False).metrics
        compared = [k for k in cli if "latency" not in k and not k.endswith("_seconds")]
        assert len(compared) > 20
        differ = {k: (cli[k], api.get(k)) for k in compared
                  if not ((cli[k] is None and api.get(k) is None)
                          or (cli[k] is not None and api.get(k) is not None and math.isclose(cli[k], api[k])))}
        assert differ == {}, data
    assert cli["pass_rate"] is not None
