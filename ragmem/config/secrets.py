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
The real values reach a flow through this process's environment (``RAGMEM_SECRETS``, inherited by
the subprocesses that run a served deployment's flow runs), never through the Prefect API.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
ENV = "RAGMEM_SECRETS"
_WORDS = {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential", "credentials", "auth",
          "authorization", "bearer", "cookie"}


_QUERY_WORDS = _WORDS | {"sig", "signature", "code"}
_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(name)).lower()) if w]


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


def scrub(text: str) -> str:
    """``text`` with every URL in it masked (:func:`mask_url`): for lines printed or logged.

    >>> scrub("agent.url http://u:pw@h/a?token=t: cannot connect")
    'agent.url http://u:***@h/a?token=***: cannot connect'
    """
    def one(match: re.Match) -> str:
        url = match.group(0)
        kept = url.rstrip(":,;.)]")  # the punctuation of the sentence around it
        return mask_url(kept) + url[len(kept):]

    return _URL.sub(one, text) if "://" in str(text) else text


class ScrubFilter(logging.Filter):
    """Masks the URLs of every record of the logger it is added to (:func:`scrub`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "://" in message:
            record.msg, record.args = scrub(message), ()
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
