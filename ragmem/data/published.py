"""Published datasets ragmem can fetch: where each is published, pinned by commit and sha256.

``ragmem data fetch NAME`` downloads a dataset's files into the home's cache,
``$RAGMEM_HOME/data/NAME/`` (:mod:`ragmem.runtime.home`), and a config names them as ``fetched:NAME/FILE``
(``configs/locomo.yaml``, ``configs/seed_samples.yaml``). Each file is read to a temporary file
beside its place, its sha256 checked against the pinned one, and only then moved into place: a
failed download or a wrong checksum keeps nothing (and exits 2). The files are not copied into the
project: each stays under its own licence where its authors publish it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ragmem.data import beam_pins
from ragmem.data.hashing import file_sha256
from ragmem.errors import ConfigError, RagmemError
from ragmem.runtime.home import data_cache

PREFIX = "fetched:"
TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Published:
    name: str
    about: str
    base_url: str                 # the files are base_url + "/" + file name
    files: dict[str, str]         # file name -> sha256
    licence: str


DATASETS = {d.name: d for d in (
    Published("locomo", "LoCoMo long-term conversational memory benchmark (Maharana et al., ACL 2024): "
              "10 conversations, 1,986 questions",
              "https://raw.githubusercontent.com/snap-research/locomo/e76cdff4a04fce19090596d49862fe87a5c15aaa/data",
              {"locomo10.zip": "5c342973da4b45c12583c9fc7594d6410880f5aba2c491a0db09db262c906fb5"},
              "research use; cite the paper (see the snap-research/locomo repository)"),
    Published("seed-samples", "the 16 examples of LuochuanAD/Evaluation_RAG_Memory, the keyword-overlap "
              "evaluation ragmem grew out of (8 with a correct reference, 8 with a wrong one)",
              "https://raw.githubusercontent.com/LuochuanAD/Evaluation_RAG_Memory/1e08f9899a2911db73f3331d4c55f2cfe34cd105",
              {"evaluation_samples_true.json": "a2792b3b2eabbd65c3ae1284ccee90a87d237115ea517e7d7eb154a50f084e9e",
               "evaluation_samples_false.json": "f3f63636f648f68864b6d290f5a500c7c905e5b3be9b980de991d69b6f7f7942",
               "LICENSE": "922529915a25155e298a27f3d7f87849a610f14250f494e96e609910a60d3569"},
              "MIT (LICENSE, fetched with the data)"),
    *(Published(f"beam-{scale}", f"BEAM long-term memory benchmark (Tavakoli et al., ICLR 2026), its {scale} "
                f"conversations ({len(files) // 2}) with their probing questions (ten abilities, rubric-scored)",
                f"{beam_pins.BASE}/{scale}", files,
                "no licence file in the authors' repository: research use, as the paper describes; cite it")
      for scale, files in beam_pins.PINS.items()),
)}
#: ``ragmem data fetch beam --scale S``: the scales, and the paper's names for them (its 128K is the 100K folder)
BEAM_SCALES = {**{scale: scale for scale in beam_pins.PINS}, "128K": "100K"}


def dataset(name: str) -> Published:
    if name not in DATASETS:
        raise RagmemError(f"data: unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    return DATASETS[name]


def folder(name: str) -> Path:
    """Where ``name``'s files are kept: ``$RAGMEM_HOME/data/NAME``."""
    return data_cache() / name


def is_fetched(name: str) -> bool:
    return all((folder(name) / f).is_file() for f in dataset(name).files)


def _download(url: str, target: Path, expected: str) -> None:
    """``url`` into ``target`` when its sha256 is ``expected``; nothing is left behind otherwise."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(handle, "wb") as out, urllib.request.urlopen(url, timeout=TIMEOUT_S) as reply:
            shutil.copyfileobj(reply, out)
        got = file_sha256(tmp)
        if got != expected:
            raise RagmemError(f"data fetch: {url}: sha256 {got} is not the pinned {expected}; nothing was kept")
        os.replace(tmp, target)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc
        if isinstance(exc, urllib.error.HTTPError):
            reason = f"HTTP {exc.code} {exc.reason}"
        elif isinstance(reason, OSError):  # no route to the host: offline, no DNS, a firewall
            reason = (f"{urllib.parse.urlsplit(url).hostname} cannot be reached from this machine: "
                      f"{reason.strerror or reason}; where there is a network, download the file and put it at "
                      f"{target} (its sha256 must be {expected}), or give --mirror URL")
        raise RagmemError(f"data fetch: {url}: cannot be downloaded ({reason}); nothing was kept") from None
    finally:
        Path(tmp).unlink(missing_ok=True)


def fetch(name: str, mirror: str | None = None, force: bool = False, say: Callable[[str], None] = print) -> Path:
    """Download ``name``'s files (from ``mirror`` + "/" + file name instead, when given; the pinned
    checksums still apply) into :func:`folder`; a file already there with the right checksum is kept.
    All or nothing: on any failure the files this call fetched are removed."""
    spec = dataset(name)
    base = (mirror or spec.base_url).rstrip("/")
    target = folder(name)
    fetched: list[Path] = []
    try:
        for file, expected in spec.files.items():
            path = target / file
            if path.is_file() and not force and file_sha256(path) == expected:
                say(f"{path}: present, checksum verified")
                continue
            _download(f"{base}/{file}", path, expected)
            fetched.append(path)
            say(f"{path}: fetched from {base}/{file}, sha256 verified")
    except BaseException:
        for path in fetched:
            path.unlink(missing_ok=True)
        raise
    return target


def resolve(value: str, setting: str) -> str:
    """``fetched:NAME/FILE`` (or ``fetched:NAME``: its folder) as the path in the home's cache. A
    dataset not fetched yet is named when the data is checked, with the command that fetches it
    (:func:`ragmem.data.readers.check_path`), so that ``--data`` can still replace it."""
    rest = value[len(PREFIX):].strip("/")
    name, _, file = rest.partition("/")
    if name not in DATASETS:
        raise ConfigError(f"{setting}: {value!r}: unknown dataset {name!r} (known: {', '.join(DATASETS)})")
    return str(folder(name) / file) if file else str(folder(name))
