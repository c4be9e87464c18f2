"""A secret written into a config is masked everywhere ragmem writes, the Prefect database included,
while the agent still receives it. Through a whole run of the command: tests/e2e/test_secrets.py."""

from __future__ import annotations

import json

import pytest

from ragmem.config import secrets as masking
from tests.conftest import ROOT, write_replayed


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


