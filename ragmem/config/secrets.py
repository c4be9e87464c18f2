"""Secrets written into a config: which settings are secret, masking them wherever a config is
written, and keeping them out of the Prefect database while the flow still receives them.

A setting is secret when a word of its name (split at ``_``, ``-``, ``.`` and camelCase) is one of
``key``, ``apikey``, ``token``, ``secret``, ``password``, ``passwd``, ``pwd``, ``credential(s)``,
``auth``, ``authorization``, ``bearer`` or ``cookie``, at any depth (``agent.params.api_key``,
``agent.params.options.accessToken``), unless its last word is ``env``: ``api_key_env`` names an
environment variable, which is the way to pass a secret (the documentation says so). ``max_tokens`` and
``tokenizer`` are not secret (``tokens`` and ``tokenizer`` are other words).

A URL carries secrets of its own whatever its setting's name: the password of a ``user:password@``
part, and the value of a query parameter whose name reads as a secret (the words above, plus
``sig``, ``signature`` and ``code``: ``?api_key=...``, ``?X-Amz-Signature=...``). :func:`mask_url`
masks them in a URL, :func:`scrub` in any text (an error line, a log line); the real URL lives only
in memory.

Masked (``***``): MLflow params, the ``config.json`` artifact, the summary, the journal's
``run.json``, the resume hint, the parameters of every Prefect flow run and deployment, and (URLs)
every line ragmem prints or logs.

Masked by value, too: a value derived from a secret (a signature that names the judge's URL, an
error line that quotes it) would carry it out past every rule above, which read names and URLs.
So every config this process loads gives its secrets to :func:`remember` (the values of secret
settings, the passwords and secret query values of its URLs, the values of the environment
variables its ``*_env`` settings name), and :func:`scrub`, which every written text goes through,
replaces each of them, wherever it stands, by ``***``. The values are held in this process's memory
only; one shorter than 4 characters is too short to find safely and is not held (the rules above
still mask it in its setting and its URL).
The real values reach a flow through this process's environment (``RAGMEM_SECRETS``, inherited by
the subprocesses that run a served deployment's flow runs), never through the Prefect API.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import os
import re
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

MASK = "***"
ENV = "RAGMEM_SECRETS"
_WORDS = {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential", "credentials", "auth",
          "authorization", "bearer", "cookie"}


_QUERY_WORDS = _WORDS | {"sig", "signature", "code"}
# a scheme of at most 32 characters that starts where a word does: each position is tried against at most
# 33 characters, so a scrub is linear (an unbounded scheme tried every start of a long run of letters to
# its end: a 10 MB value never finished printing)
_URL = re.compile(r"(?<![a-zA-Z0-9+.-])[a-zA-Z][a-zA-Z0-9+.-]{0,31}://[^\s'\"<>|]+")
MIN_VALUE = 4  # a secret value shorter than this is not searched for in texts (it would match too much)
_VALUES: set[str] = set()
_FOUND: list[re.Pattern | None] = [None]  # every held value, longest first, as one pattern


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(name)).lower()) if w]


@functools.lru_cache(maxsize=4096)  # (a trace's records ask of the same few keys thousands of times)
def is_secret(name: str) -> bool:
    words = _words(name)
    return bool(words) and words[-1] != "env" and any(w in _WORDS for w in words)


def mask_url(url: str) -> str:
    """``url`` with the password of its ``user:password@`` part and the values of its secret-looking
    query parameters replaced by ``***``; any other text unchanged.

    >>> mask_url("http://bob:hunter2@host:8080/agent?api_key=sk-1&top_k=3&X-Amz-Signature=ab")
    'http://bob:***@host:8080/agent?api_key=***&top_k=3&X-Amz-Signature=***'
    >>> mask_url("http://127.0.0.1:11434/v1")
    'http://127.0.0.1:11434/v1'
    """
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, colon, password = userinfo.partition(":")
        if colon and password:
            netloc = f"{user}:{MASK}@{host}"
    query = "&".join(f"{name}={MASK}" if eq and value and any(w in _QUERY_WORDS for w in _words(name))
                     else f"{name}{eq}{value}"
                     for name, eq, value in (pair.partition("=") for pair in parts.query.split("&"))) \
        if parts.query else parts.query
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _url_secrets(text: str) -> set[str]:
    """The password and the secret query values of every URL in ``text``."""
    found = set()
    for match in _URL.finditer(text):
        try:
            parts = urlsplit(match.group(0).rstrip(":,;.)]"))
        except ValueError:
            continue
        if "@" in parts.netloc:
            password = parts.netloc.rsplit("@", 1)[0].partition(":")[2]
            found |= {password, unquote(password)} if password else set()
        for name, eq, value in (pair.partition("=") for pair in parts.query.split("&") if parts.query):
            if eq and value and any(w in _QUERY_WORDS for w in _words(name)):
                found |= {value, unquote(value)}
    return found


def remember(config: Any) -> None:
    """Hold the secrets of ``config`` (a config's settings as plain data, at any depth) so that
    :func:`scrub` masks them by value: secret settings' values, their URLs' passwords and secret
    query values, and the values of the environment variables that ``*_env`` settings name."""
    found: set[str] = set()

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v, key)
        elif isinstance(value, str):
            if key and is_secret(key):
                found.add(value)
            elif key and _words(key)[-1:] == ["env"] and os.environ.get(value):
                found.add(os.environ[value])
            if "://" in value:
                found.update(_url_secrets(value))
        elif key and is_secret(key) and value is not None and not isinstance(value, bool):
            found.add(str(value))

    walk(config)
    alerts = config.get("alerts") if isinstance(config, dict) else None  # (an alert's destination: all of it a secret)
    for url in (alerts.get("to") or [] if isinstance(alerts, dict) else []):
        if isinstance(url, str):
            found.add(url.split("://", 1)[-1])
    fresh = {v for v in found if len(v) >= MIN_VALUE and v != MASK} - _VALUES
    if fresh:
        _VALUES.update(fresh)
        _FOUND[0] = re.compile("|".join(re.escape(v) for v in sorted(_VALUES, key=len, reverse=True)))


def forget() -> None:
    """Let go of every held value (tests)."""
    _VALUES.clear()
    _FOUND[0] = None


def scrub(text: str) -> str:
    """``text`` with every secret value held (:func:`remember`) and every URL's secrets masked
    (:func:`mask_url`): for every text ragmem writes, prints or logs.

    >>> scrub("agent.url http://u:pw@h/a?token=t: cannot connect")
    'agent.url http://u:***@h/a?token=***: cannot connect'
    """
    def one(match: re.Match) -> str:
        url = match.group(0)
        kept = url.rstrip(":,;.)]")  # the punctuation of the sentence around it
        return mask_url(kept) + url[len(kept):]

    text = text if not isinstance(text, str) else _FOUND[0].sub(MASK, text) if _FOUND[0] is not None else text
    return _URL.sub(one, text) if "://" in str(text) else text


def scrub_all(value: Any) -> Any:
    """``value`` (plain data: a summary, a row) with :func:`scrub` applied to every text in it, keys
    kept as they are."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: scrub_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_all(v) for v in value]
    return value


#: values that are keys whatever surrounds them, as their issuers shape them (OpenAI and alike ``sk-``,
#: AWS access keys, GitHub and Slack tokens, Google API keys, JSON web tokens, a bearer credential);
#: bounded repetitions, so a search is linear in the text
_KEY_LIKE = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,256}"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|\bgh[pousr]_[A-Za-z0-9]{30,255}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,255}"
    r"|\bAIza[0-9A-Za-z_-]{35}"
    r"|\beyJ[A-Za-z0-9_-]{8,2048}\.[A-Za-z0-9_-]{8,2048}\.[A-Za-z0-9_-]{8,2048}"
    r"|(?i:\bbearer)\s+[A-Za-z0-9._~+/-]{12,2048}=*")
#: a secret written as an assignment in a text (``password: hunter2``, ``api_key=abc``, ``"token": "x"``):
#: its value masked, its name kept
_ASSIGNED = re.compile(
    r"(?i)(\b[a-z_-]{0,40}(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|authorization"
    r"|cookie|credentials?)\b[\"']?\s{0,8}[:=]\s{0,8}[\"']?)((?:(?:bearer|basic)\s{1,4})?[^\s\"',;&]{3,2048})")


#: what each pattern cannot match without: a text holding none of them is left as it is, unsearched
#: (the patterns cost ~0.13 ms a KB of text, these look-ups ~2 µs; traffic is mostly text without keys)
_KEY_MARKS = ("sk-", "pk-", "rk-", "AKIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "xox", "AIza", "eyJ")
_ASSIGNED_MARKS = ("passw", "pwd", "secret", "token", "api", "access", "authorization", "cookie", "credential")


def _masked_keys(text: str) -> str:
    """``text`` with :data:`_ASSIGNED` and :data:`_KEY_LIKE` masked (each searched only when its marks are in it)."""
    lower = text.lower()
    if any(mark in lower for mark in _ASSIGNED_MARKS):
        text = _ASSIGNED.sub(lambda m: m.group(1) + MASK, text)
    if "bearer" in lower or any(mark in text for mark in _KEY_MARKS):
        text = _KEY_LIKE.sub(MASK, text)
    return text


def mask_traffic(value: Any) -> Any:
    """``value`` (a record made from a trace: plain data) with what reads as a secret masked, for
    traffic the user's application saw, whose secrets no setting names: the value of a key that reads
    as a secret (:func:`is_secret`), values shaped as keys (``sk-...``, ``AKIA...``, a JWT, a bearer
    credential), assignments in a text (``password: hunter2``), and everything :func:`scrub` masks.

    >>> mask_traffic({"query": "log in with password=hunter22 and key sk-abcdefghijklmnop1234", "api_key": "k1"})
    {'query': 'log in with password=*** and key ***', 'api_key': '***'}
    """
    if isinstance(value, str):
        return scrub(_masked_keys(value))
    if isinstance(value, dict):
        return {k: MASK if is_secret(str(k)) and v is not None and not isinstance(v, (int, float)) else mask_traffic(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_traffic(v) for v in value]
    return value


class ScrubFilter(logging.Filter):
    """Masks the URLs of every record of the logger it is added to (:func:`scrub`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "://" in message or _FOUND[0] is not None:
            cleaned = scrub(message)
            if cleaned != message:
                record.msg, record.args = cleaned, ()
        return True


def mask(value: Any, key: str = "") -> Any:
    """``value`` with every secret setting's value replaced by ``***`` (``None`` stays ``None``) and
    the secrets of every URL in a text masked (:func:`scrub`)."""
    if key and is_secret(key) and value is not None:
        return MASK
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: mask(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    return value


def _secrets(value: Any, path: tuple = ()) -> dict[tuple, Any]:
    found: dict[tuple, Any] = {}
    if isinstance(value, dict):
        for k, v in value.items():
            if (is_secret(str(k)) and v is not None) or (isinstance(v, str) and scrub(v) != v):
                found[path + (k,)] = v
            else:
                found.update(_secrets(v, path + (k,)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if isinstance(v, str) and scrub(v) != v:
                found[path + (i,)] = v
            else:
                found.update(_secrets(v, path + (i,)))
    return found


def protect(config: dict[str, Any]) -> dict[str, Any]:
    """The config to hand to Prefect (secrets masked); the real values are kept in this process's
    environment for :func:`restore`."""
    found = _secrets(config)
    if found:
        held = _held()
        held.update({json.dumps(list(path)): value for path, value in found.items()})
        os.environ[ENV] = json.dumps(held)
    return mask(config)


def _held() -> dict[str, Any]:
    try:
        return json.loads(os.environ.get(ENV, "{}"))
    except json.JSONDecodeError:
        return {}


def restore(config: dict[str, Any]) -> dict[str, Any]:
    """A flow's config with the masked values put back from the environment (see :func:`protect`)."""
    held = _held()
    if not held:
        return config
    remember([{str((json.loads(path) or [""])[-1]): value} for path, value in held.items()])
    remember({"alerts": {"to": [v for p, v in held.items() if json.loads(p)[:2] == ["alerts", "to"]]}})
    out = copy.deepcopy(config)
    for path_text, value in held.items():
        node, path = out, json.loads(path_text)
        try:
            for part in path[:-1]:
                node = node[part]
            if node[path[-1]] == MASK or (isinstance(value, str) and node[path[-1]] == scrub(value)):
                node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # held for another config of this process
    return out
