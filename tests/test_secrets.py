"""A secret written into a config is masked everywhere ragmem writes, the Prefect database included,
while the agent still receives it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragmem import masking
from tests.conftest import ROOT, run_cli, write_replayed


@pytest.mark.parametrize("name, secret", [
    ("api_key", True), ("apiKey", True), ("x-api-key", True), ("accessToken", True), ("secret_key", True),
    ("private_key", True), ("auth_token", True), ("password", True), ("db_passwd", True), ("Authorization", True),
    ("api_key_env", False), ("max_tokens", False), ("tokenizer", False), ("keywords", False), ("top_k", False),
    ("monkey", False), ("tokens", False), ("model", False),
])
def test_which_names_are_secret(name, secret):
    assert masking.is_secret(name) is secret


def test_protect_masks_and_restore_gives_back(monkeypatch):
    monkeypatch.delenv(masking.ENV, raising=False)
    config = {"agent": {"params": {"api_key": "sk-1", "options": {"accessToken": "t-2", "depth": 1}},
                        "api_key_env": "MY_KEY"}, "judge": {"max_tokens": 10}, "bench": {"methods": [{"token": "t-3"}]}}
    protected = masking.protect(config)
    assert protected == {"agent": {"params": {"api_key": "***", "options": {"accessToken": "***", "depth": 1}},
                                   "api_key_env": "MY_KEY"}, "judge": {"max_tokens": 10},
                         "bench": {"methods": [{"token": "***"}]}}
    assert "sk-1" not in json.dumps(protected)
    assert masking.restore(protected) == config
    assert masking.restore({"agent": {"params": {"api_key": "given"}}}) == {"agent": {"params": {"api_key": "given"}}}



@pytest.mark.e2e
def test_a_secret_in_the_config_reaches_the_agent_and_nothing_else(prefect_env, tmp_path):
    secret = "sk-test-NEVER-WRITE-9f3c2"
    config = tmp_path / "secret.yaml"
    config.write_text(json.dumps({"experiment": "secrets", "data": {"files": [{"path": write_replayed(tmp_path, 3)}]},
                                  "agent": {"type": "python", "target": "tests.sample_agents:KeyRequired",
                                            "params": {"api_key": secret}}}), encoding="utf-8")
    env = {**prefect_env, "RAGMEM_TEST_EXPECTED_KEY": secret, "PYTHONPATH": str(ROOT)}
    done = run_cli(["run", str(config), "--set", f"agent.params.options={{accessToken: {secret}}}", "-o", "s.json"],
                   env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr  # the agent was built with the real key and token
    assert json.loads((tmp_path / "s.json").read_text())["n_errors"] == 0
    assert secret not in done.stdout + done.stderr
    written = [p for folder in (tmp_path, Path(prefect_env["RAGMEM_HOME"])) for p in folder.rglob("*") if p.is_file()]
    assert any(p.name == "mlflow.db" for p in written) and any("prefect" in str(p) and p.suffix == ".db" for p in written)
    leaks = [str(p) for p in written if p != config and secret.encode() in p.read_bytes()]
    assert leaks == []  # MLflow store and artifacts, journal, Prefect database (flow-run parameters, logs)
