"""A secret written into a config, end to end: it reaches the agent (in its params, inside its URL)
and nothing else that ragmem writes, the Prefect database included. The masking itself, in process:
tests/config/test_secrets.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli, write_replayed

pytestmark = pytest.mark.e2e


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


@pytest.mark.e2e
def test_secrets_inside_an_agent_url_reach_the_agent_and_nothing_else(prefect_env, tmp_path):
    """?api_key=... and user:password@ in agent.url: the agent receives both (the query and HTTP
    Basic auth, the preflight too); no file of the store, the journal or the Prefect database, and no
    line printed, holds either."""
    from tests.openai_stub import Stub

    key, password = "SECRET-KEY-q81x", "SECRET-PW-z72m"
    with Stub(agent=lambda body: {"answer": "Answer 1.", "contexts": []}) as stub:
        url = stub.base_url.replace("/v1", "/agent").replace("http://", f"http://bob:{password}@") + f"?api_key={key}"
        config = tmp_path / "url.yaml"
        config.write_text(json.dumps({"experiment": "url-secrets", "agent": {"type": "http", "url": url},
                                      "data": {"files": [{"path": write_replayed(tmp_path, 3)}]}}), encoding="utf-8")
        done = run_cli(["run", str(config), "-o", "s.json"], env=prefect_env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "s.json").read_text())["n_errors"] == 0
    assert len(stub.paths) == 3 and all(p.endswith(f"?api_key={key}") for p in stub.paths)
    basic = "Basic " + base64.b64encode(f"bob:{password}".encode()).decode()
    auth = [{k.lower(): v for k, v in h.items()}.get("authorization") for h in stub.headers]
    assert auth == [basic] * 3, auth
    assert stub.gets and stub.gets[0][1].get("Authorization") == basic  # the preflight, with the same credentials
    assert key not in done.stdout + done.stderr and password not in done.stdout + done.stderr
    written = [p for folder in (tmp_path, Path(prefect_env["RAGMEM_HOME"])) for p in folder.rglob("*") if p.is_file()]
    assert any(p.name == "mlflow.db" for p in written)
    leaks = [str(p) for p in written if p != config and (key.encode() in p.read_bytes() or password.encode() in p.read_bytes())]
    assert leaks == []
