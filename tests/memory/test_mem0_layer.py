"""The mem0 example layer (examples/memory_layers/mem0_layer.py) through bench-memory, against a
local OpenAI-compatible embeddings stub: needs the ``mem0`` extra (``pip install 'ragmem[mem0]'``)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re

import pytest

from tests.conftest import ROOT
from tests.openai_stub import Stub
from tests.memory.test_memory import _conversation

os.environ["MEM0_TELEMETRY"] = "False"  # read when mem0 is imported: no call leaves this machine
pytest.importorskip("mem0", reason="mem0ai is not installed (pip install 'ragmem[mem0]')")


def _embed(text: str) -> list[float]:
    """A bag of hashed words: texts sharing words are near."""
    vector = [0.0] * 64
    for word in re.findall(r"\w+", text.lower()):
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def test_mem0_raw_mode_runs_as_a_memory_layer_with_evidence_ids(tmp_path, shared_store):
    from ragmem.run import engine
    from ragmem.config.loading import resolve_config

    data = tmp_path / "c1.json"
    data.write_text(json.dumps(_conversation()))
    with Stub(chat=lambda request: {"unused": True}, embed=_embed) as stub:
        endpoint = {"model": "embed-test", "openai_base_url": stub.base_url, "api_key": "not-needed", "embedding_dims": 64}
        mem0 = {"name": "mem0_raw", "type": "python", "target": "mem0_layer:Mem0Layer",
                "params": {"mode": "raw", "embedding_dims": 64, "path": str(tmp_path / "mem0"),
                           "embedder": {"provider": "openai", "config": endpoint},
                           "llm": {"provider": "openai", "config": {"model": "chat-test", "openai_base_url": stub.base_url,
                                                                    "api_key": "not-needed"}}}}
        config = resolve_config(None, extra={"experiment": "mem0", "tracking": dict(shared_store),
                                             "import_paths": [str(ROOT / "examples" / "memory_layers")],
                                             "bench": {"data": str(data), "methods": ["reference", mem0]}})
        result = engine.bench_memory(config, preflight=False)
        embedded = [r for r in stub.requests if "input" in r]
    by_name = {m["method"]: m for m in result["methods"]}
    assert by_name["mem0_raw"]["status"] == "FINISHED", by_name["mem0_raw"].get("error")
    metrics = by_name["mem0_raw"]["metrics"]
    assert metrics["n_add_errors"] == 0 and metrics["n_errors"] == 0
    assert metrics["evidence_recall"] is not None and metrics["n_evidence_undefined"] == 0  # ids came back
    assert metrics["add_latency_p50"] > 0 and metrics["ingest_total_s"] > 0
    assert len(embedded) >= 3 + 3  # every turn stored, every question searched: through the local stub only
