"""``ragmem data fetch``: published datasets into the home's cache, pinned by sha256, all or nothing;
configs name them as ``fetched:NAME/FILE``. Downloads come from a local HTTP server of the
workplace's shared copies (the same bytes as the pinned files)."""

from __future__ import annotations

import pytest

from ragmem.data import published
from tests.conftest import ROOT, SEED, SHARED, file_server

pytestmark = pytest.mark.e2e  # a local HTTP server


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _need(folder):
    if not folder.is_dir():
        pytest.skip(f"{folder} not found (the workplace's shared/data folder is absent)")
    return folder


def test_the_pinned_checksums_are_those_of_the_published_copies():
    for name, folder in (("locomo", SHARED / "locomo"), ("seed-samples", SEED)):
        for file, expected in published.dataset(name).files.items():
            assert published.file_sha256(_need(folder) / file) == expected, (name, file)


def test_fetch_verifies_keeps_and_does_not_download_twice(home, ragmem_main):
    with file_server(_need(SHARED / "locomo")) as (url, requested):
        ran = ragmem_main(["data", "fetch", "locomo", "--mirror", url])
        assert ran.returncode == 0, ran.stderr
        assert f"{home.resolve() / 'data' / 'locomo' / 'locomo10.zip'}: fetched from {url}/locomo10.zip, sha256 verified" in ran.stdout
        assert requested == ["/locomo10.zip"]
        ran = ragmem_main(["data", "fetch", "locomo", "--mirror", url])
        assert ran.returncode == 0 and "present, checksum verified" in ran.stdout
        assert requested == ["/locomo10.zip"]  # nothing downloaded again
    assert sorted(p.name for p in (home / "data" / "locomo").iterdir()) == ["locomo10.zip"]
    listed = ragmem_main(["data", "list"])
    assert "locomo: LoCoMo" in listed.stdout and f"fetched, in {home.resolve() / 'data' / 'locomo'}" in listed.stdout
    assert "seed-samples: " in listed.stdout and "not fetched" in listed.stdout


def test_a_wrong_checksum_or_a_failed_download_keeps_nothing(home, ragmem_main):
    seed = _need(SEED)
    with file_server(seed, broken={"/evaluation_samples_false.json": b"[]"}) as (url, requested):
        ran = ragmem_main(["data", "fetch", "seed-samples", "--mirror", url])
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1, ran.stderr
    assert ran.stderr.startswith(f"error: data fetch: {url}/evaluation_samples_false.json: sha256 ")
    assert "is not the pinned f3f63636" in ran.stderr and ran.stderr.rstrip().endswith("nothing was kept")
    assert requested == ["/evaluation_samples_true.json", "/evaluation_samples_false.json"]
    assert list((home / "data" / "seed-samples").iterdir()) == []  # the first file, fetched, removed too
    with file_server(seed / "nothing-here") as (url, _):
        ran = ragmem_main(["data", "fetch", "seed-samples", "--mirror", url])
    assert ran.returncode == 2 and "cannot be downloaded (HTTP 404 File not found)" in ran.stderr and "nothing was kept" in ran.stderr
    ran = ragmem_main(["data", "fetch", "seed-samples", "--mirror", "http://127.0.0.1:9/x"])  # nobody listens
    assert ran.returncode == 2 and "cannot be downloaded (127.0.0.1 cannot be reached from this machine: " \
        "Connection refused; where there is a network, download the file and put it at " in ran.stderr, ran.stderr
    assert "(its sha256 must be " in ran.stderr and "or give --mirror URL); nothing was kept" in ran.stderr
    assert list((home / "data" / "seed-samples").iterdir()) == []
    ran = ragmem_main(["data", "fetch", "squad"])
    assert ran.returncode == 2 and "unknown dataset 'squad'; known: locomo, seed-samples" in ran.stderr


def test_a_config_names_a_dataset_not_fetched_with_the_command_that_fetches_it(home, ragmem_main, tmp_path):
    ran = ragmem_main(["run", str(ROOT / "configs" / "seed_samples.yaml"), "--dry-run"], cwd=tmp_path)
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1, ran.stderr
    assert "file not found; seed-samples is not fetched yet: run ragmem data fetch seed-samples" in ran.stderr
    with file_server(_need(SEED)) as (url, _):
        assert ragmem_main(["data", "fetch", "seed-samples", "--mirror", url]).returncode == 0
    ran = ragmem_main(["run", str(ROOT / "configs" / "seed_samples.yaml"), "--dry-run"], cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "16 examples" in ran.stdout + ran.stderr
