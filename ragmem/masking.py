"""Secrets written into a config: which settings are secret, masking them wherever a config is
written, and keeping them out of the Prefect database while the flow still receives them.

A setting is secret when a word of its name (split at ``_``, ``-``, ``.`` and camelCase) is one of
``key``, ``apikey``, ``token``, ``secret``, ``password``, ``passwd``, ``pwd``, ``credential(s)``,
``auth``, ``authorization``, ``bearer`` or ``cookie``, at any depth (``agent.params.api_key``,
``agent.params.options.accessToken``), unless its last word is ``env``: ``api_key_env`` names an
environment variable, which is the way to pass a secret (the README says so). ``max_tokens`` and
``tokenizer`` are not secret (``tokens`` and ``tokenizer`` are other words).

Masked (``***``): MLflow params, the ``config.json`` artifact, the summary, the journal's
``run.json``, the resume hint, and the parameters of every Prefect flow run and deployment.
The real values reach a flow through this process's environment (``RAGMEM_SECRETS``, inherited by
the subprocesses that run a served deployment's flow runs), never through the Prefect API.
"""

from __future__ import annotations

import copy
import json
import os
import re
from typing import Any

MASK = "***"
ENV = "RAGMEM_SECRETS"
_WORDS = {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential", "credentials", "auth",
          "authorization", "bearer", "cookie"}


def is_secret(name: str) -> bool:
    words = [w for w in re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(name)).lower()) if w]
    return bool(words) and words[-1] != "env" and any(w in _WORDS for w in words)


def mask(value: Any, key: str = "") -> Any:
    """``value`` with every secret setting's value replaced by ``***`` (``None`` stays ``None``)."""
    if key and is_secret(key) and value is not None:
        return MASK
    if isinstance(value, dict):
        return {k: mask(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    return value


def _secrets(value: Any, path: tuple = ()) -> dict[tuple, Any]:
    found: dict[tuple, Any] = {}
    if isinstance(value, dict):
        for k, v in value.items():
            if is_secret(str(k)) and v is not None:
                found[path + (k,)] = v
            else:
                found.update(_secrets(v, path + (k,)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
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
            if node[path[-1]] == MASK:
                node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # held for another config of this process
    return out
