"""A secret written into a config is masked everywhere ragmem writes, the Prefect database included,
while the agent still receives it."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from ragmem.config import secrets as masking
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


def test_a_url_keeps_its_secrets_in_memory_only(monkeypatch):
    monkeypatch.delenv(masking.ENV, raising=False)
    url = "http://bob:s3cr%40t@host:8080/agent?api_key=sk-1&top_k=3&sig=abc&code=x&mode=fast"
    assert masking.mask_url(url) == "http://bob:***@host:8080/agent?api_key=***&top_k=3&sig=***&code=***&mode=fast"
    assert masking.mask_url("https://host/v1?keywords=a") == "https://host/v1?keywords=a"  # not a secret word
    assert masking.scrub(f"judge:llm|endpoint:{url}|temp:0") == \
        "judge:llm|endpoint:http://bob:***@host:8080/agent?api_key=***&top_k=3&sig=***&code=***&mode=fast|temp:0"
    config = {"agent": {"type": "http", "url": url}, "bench": {"methods": [{"url": url}]}, "tracking": {"uri": None}}
    protected = masking.protect(config)
    assert "sk-1" not in json.dumps(protected) and "s3cr" not in json.dumps(protected)
    assert masking.restore(protected) == config  # the flow gets the real URL back


def test_a_dead_agent_url_is_named_without_its_secrets(tmp_path, ragmem_main):
    from tests.conftest import free_port

    url = f"http://bob:SECRET-PW-2@127.0.0.1:{free_port()}/agent?api_key=SECRET-KEY-1"
    done = ragmem_main(["run", str(ROOT / "configs" / "demo.yaml"), "--dry-run", "--set", "agent.type=http",  # the preflight,
                        "--set", f"agent.url={url}", "--data", write_replayed(tmp_path, 2)], cwd=tmp_path)  # no Prefect
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: agent.url http://bob:***@127.0.0.1:") and "/agent?api_key=***: cannot connect" in last
    assert "SECRET" not in done.stdout + done.stderr


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
