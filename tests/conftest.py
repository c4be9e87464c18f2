"""Shared fixtures. Nothing here calls outside this machine."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
SEED = SHARED / "seed-samples"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def seed_dir() -> Path:
    if not (SEED / "evaluation_samples_true.json").is_file():
        pytest.skip(f"seed data not found at {SEED} (the workplace's shared/data folder is absent)")
    return SEED


@pytest.fixture(scope="session")
def prefect_env(tmp_path_factory):
    """A Prefect server on a free 127.0.0.1 port for the whole session, started the way the CLI
    starts its managed server; yields the environment a CLI subprocess needs to use it."""
    home = tmp_path_factory.mktemp("ragmem-home")
    env = {**os.environ, "RAGMEM_HOME": str(home), "RAGMEM_PREFECT_PORT": str(free_port()),
           "DO_NOT_TRACK": "true", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    started = subprocess.run([sys.executable, "-m", "ragmem.cli", "server", "start"], env=env,
                             capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stderr
    yield env
    subprocess.run([sys.executable, "-m", "ragmem.cli", "server", "stop"], env=env, capture_output=True,
                   text=True, timeout=60)


def run_cli(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmem.cli", *args], env=env or dict(os.environ),
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)
