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


def files_holding(secrets, prefect_env, tmp_path, config):
    """(file, secret) for each secret found in a file of the test's folder or the shared ragmem home
    (the Prefect database, the server's folder). The home is shared by the suite's workers: a file
    another worker's command gives back (a lease) may be gone between listing and reading; it is
    skipped, not counted as read."""
    found = []
    for folder in (tmp_path, Path(prefect_env["RAGMEM_HOME"])):
        for path in folder.rglob("*"):
            if path == config or not path.is_file():
                continue
            try:
                content = path.read_bytes()
            except FileNotFoundError:
                continue
            found += [(str(path), s) for s in secrets if s.encode() in content]
    return found


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
    assert files_holding([secret], prefect_env, tmp_path, config) == []  # MLflow store and artifacts, journal, Prefect database (flow-run parameters, logs)


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
    assert files_holding([key, password], prefect_env, tmp_path, config) == []


@pytest.mark.e2e
def test_secrets_in_the_judge_embeddings_and_agent_urls_are_masked_in_every_derived_value(prefect_env, tmp_path):
    """A password (user:password@) and an ?api_key= in the agent's, the judge's and the embeddings'
    URLs, and the judge's key in an environment variable (judge.api_key_env): the endpoints receive
    them; the judge's signature and every other value derived from a URL are masked by value, so no
    file of the store, the artifacts, the report, the journal, the --output file or the Prefect
    database, and no line printed, holds any of the three."""
    from tests.openai_stub import Stub

    key, password, env_key = "SECRET-KEY-u53k", "SECRET-PW-w19q", "SECRET-ENV-h44c"
    with Stub(agent=lambda body: {"answer": "Answer 1.", "contexts": ["Answer 1."]},
              chat=lambda request: {"verdict": "yes", "reason": "supported"}, embed=lambda text: [1.0, 0.5]) as stub:
        secret_url = stub.base_url.replace("http://", f"http://bob:{password}@") + f"?api_key={key}"
        config = tmp_path / "urls.yaml"
        config.write_text(json.dumps({
            "experiment": "derived-secrets",
            "agent": {"type": "http", "url": secret_url.replace("/v1?", "/agent?")},
            "judge": {"type": "llm", "model": "judge-model", "base_url": secret_url, "api_key_env": "RAGMEM_TEST_JUDGE_KEY"},
            "embeddings": {"model": "embed-model", "base_url": secret_url},
            "metrics": ["pass_rate", "faithfulness", "answer_relevancy"],
            "data": {"files": [{"path": write_replayed(tmp_path, 3)}]}}), encoding="utf-8")
        env = {**prefect_env, "RAGMEM_TEST_JUDGE_KEY": env_key}
        done = run_cli(["run", str(config), "-o", "s.json"], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["n_errors"] == 0 and summary["metrics"]["pass_rate"] is not None
    assert "judge:llm|model:judge-model|endpoint:http://bob:***@" in summary["params"]["judge.signature"]
    auth = {({k.lower(): v for k, v in h.items()}.get("authorization") or "")[:6] for h in stub.headers}
    assert len(stub.paths) > 6 and auth == {"Basic "}, auth  # user:password@ reaches every endpoint as HTTP Basic
    assert {p.split("?")[0] for p in stub.paths} >= {"/agent", "/v1/chat/completions", "/v1/embeddings"}, set(stub.paths)
    printed = done.stdout + done.stderr
    assert not [s for s in (key, password, env_key) if s in printed]
    written = [p for folder in (tmp_path, Path(prefect_env["RAGMEM_HOME"])) for p in folder.rglob("*") if p.is_file()]
    assert any(p.name == "mlflow.db" for p in written) and any(p.name == "report.html" for p in written)
    assert files_holding([key, password, env_key], prefect_env, tmp_path, config) == []
