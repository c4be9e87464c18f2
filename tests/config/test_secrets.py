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




def test_a_value_derived_from_a_secret_is_masked_by_value(monkeypatch):
    """A signature that names the judge's URL, a line that quotes the key an environment variable
    holds, a log record without a URL: each is masked by the values a loaded config held, not by
    the names around them."""
    import logging

    from ragmem.config.loading import RunConfig

    monkeypatch.setenv("MY_JUDGE_KEY", "sk-env-7731")
    RunConfig.from_dict({"metrics": ["pass_rate"], "judge": {"type": "llm", "model": "m", "api_key_env": "MY_JUDGE_KEY",
                                   "base_url": "http://alice:pw-9911@h:1/v1?api_key=k-4471"},
                         "agent": {"type": "python", "target": "m:f", "params": {"token": "tok-5521", "pin": "ab"}}})
    signature = "judge:llm|model:m|endpoint:http://alice:pw-9911@h:1/v1?api_key=k-4471|prompts:v3"
    assert masking.scrub(signature) == "judge:llm|model:m|endpoint:http://alice:***@h:1/v1?api_key=***|prompts:v3"
    assert masking.scrub("401 for key sk-env-7731 (token tok-5521)") == "401 for key *** (token ***)"
    assert masking.scrub_all({"notes": ["pw-9911"], "n": 3, "k": {"x": "k-4471!"}}) == {"notes": ["***"], "n": 3,
                                                                                      "k": {"x": "***!"}}
    assert masking.scrub("ab cd") == "ab cd"  # shorter than 4 characters: not held (its setting is still masked)
    record = logging.LogRecord("ragmem", logging.INFO, __file__, 1, "calling with %s", ("sk-env-7731",), None)
    masking.ScrubFilter().filter(record)
    assert record.getMessage() == "calling with ***"
    masking.forget()
    assert masking.scrub("sk-env-7731") == "sk-env-7731"


def test_a_url_in_a_signature_ends_at_the_next_field():
    assert masking.scrub("base:http://h/v1?api_key=SEC|temp:0") == "base:http://h/v1?api_key=***|temp:0"


def test_an_alert_destination_is_masked_for_prefect_and_restored_in_another_process():
    """``alerts.to`` (its tokens are in its path, not a password or a query): masked in a flow's
    parameters and given back to the flow from the environment alone (a flow run's process holds no
    value of its own: :func:`forget` stands for it)."""
    config = {"alerts": {"to": ["json://127.0.0.1:5555/hook-token-1234"], "on": ["gate_failed"]}}
    masking.remember(config)
    protected = masking.protect(config)
    assert protected["alerts"]["to"] == ["json://***"]
    masking.forget()
    assert masking.restore(protected) == config


@pytest.mark.parametrize("text, masked", [
    ("use sk-proj-abcdefghijklmnop0123 now", "use *** now"),
    ("AWS AKIAIOSFODNN7EXAMPLE here", "AWS *** here"),
    ("Authorization: Bearer abcdefghijklmnop.qrs", "Authorization: ***"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlMTIz ok", "jwt *** ok"),
    ('{"password": "hunter2", "user": "ann"}', '{"password": "***", "user": "ann"}'),
    ("api_key=abc123&x=1", "api_key=***&x=1"),
    ("max_tokens=512, tokenizer=jieba, 42 tokens", "max_tokens=512, tokenizer=jieba, 42 tokens"),  # not secrets
    ("the key to the city", "the key to the city"),
])
def test_traffic_masks_what_reads_as_a_secret_and_nothing_else(text, masked):
    assert masking.mask_traffic(text) == masked


def test_traffic_masking_keeps_a_records_shape_and_counts():
    record = {"query": "q", "tokens": {"input": 3, "output": 2}, "user_password": "pw-1234", "token_count": 7,
              "contexts": [{"id": "d1", "text": "secret: s3cr3t-value"}], "history": None}
    assert masking.mask_traffic(record) == {"query": "q", "tokens": {"input": 3, "output": 2}, "user_password": "***",
                                            "token_count": 7, "contexts": [{"id": "d1", "text": "secret: ***"}],
                                            "history": None}


def test_traffic_masking_is_linear_on_a_long_text():
    import time

    text = ("a" * 200_000) + ("token " * 50_000) + ("password:" * 50_000) + ("eyJ" + "a" * 5000 + ".") * 20
    start = time.perf_counter()
    masked = masking.mask_traffic(text)
    assert masked.startswith("a" * 200_000 + "token " * 50_000) and len(masked) < len(text)
    assert time.perf_counter() - start < 5  # (a backtracking pattern takes minutes here; this takes ~0.1 s)


def test_traffic_masking_searches_only_texts_with_a_mark_and_masks_exactly_as_the_patterns():
    """The marks only skip texts the patterns cannot match: against the patterns applied to every
    text (the oracle), on texts with and without planted secrets in both cases of every word."""
    import random

    rng = random.Random(7)
    planted = ["sk-abcdefghijklmnop0123", "AKIAIOSFODNN7EXAMPLE", "Bearer abcdefghijklmnop", "BEARER xyzxyzxyzxyzxyz1",
               "ghp_" + "a" * 36, "xoxb-1234567890-abc", "AIza" + "b" * 35, "eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl",
               "Password: hunter22", "API-KEY=abc123", "AccessKey: zzz999", "Cookie=sess1234", "credentials: a/b/c",
               "PWD=top", "my_secret = s3cr3t"]
    words = ["the", "key", "city", "tokens", "passage", "apiary", "accessible", "sk", "gh", "xo", "eye", "aiza", *planted]
    for _ in range(2_000):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
        text = text.upper() if rng.random() < 0.2 else text
        oracle = masking._KEY_LIKE.sub(masking.MASK, masking._ASSIGNED.sub(lambda m: m.group(1) + masking.MASK, text))
        assert masking._masked_keys(text) == oracle, text
