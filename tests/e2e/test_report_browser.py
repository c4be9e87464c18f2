"""report.html rendered in a real headless browser (Debian's chromium; the test fails instead of
skipping when ``RAGMEM_REQUIRE_BROWSER`` is set, as in CI). The page itself, in process:
tests/report/test_report_html.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import run_cli
from tests.report.test_report_html import two_runs  # noqa: F401  (a fixture)

pytestmark = pytest.mark.e2e


BROWSER = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.e2e
def test_the_pages_render_in_a_headless_browser(two_runs, shared_store, tmp_path):  # noqa: F811  (the fixture)
    if BROWSER is None:
        if os.environ.get("RAGMEM_REQUIRE_BROWSER"):  # CI: a browser test that skips is a failure there
            pytest.fail("RAGMEM_REQUIRE_BROWSER is set and no chromium is installed")
        pytest.skip("no chromium installed (Debian: apt-get install chromium); the pages are checked as text above")
    base, worse, flipped, _ = two_runs
    env = {"MLFLOW_TRACKING_URI": shared_store["uri"], **{k: v for k, v in __import__("os").environ.items()
                                                          if k != "MLFLOW_TRACKING_URI"}}
    for args, name in (([base.run_id[:8]], "report.html"), ([base.run_id[:8], worse.run_id[:8]], "diff.html")):
        done = run_cli(["report", *args, "--output", str(tmp_path / name), "--resamples", "200"], env=env, cwd=tmp_path)
        assert done.returncode == 0 and done.stdout.strip().endswith(f"written to {tmp_path / name}"), done.stderr
    for name, expected in (("report.html", ["pass_rate", "Worst examples (25 of 36; 10 of them passed", "en-10"]),
                           ("diff.html", ["Flipped to fail (pass in A, fail in B): 6", *flipped])):
        shown = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                                f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
                                "--dump-dom", (tmp_path / name).as_uri()], capture_output=True, text=True, timeout=120)
        assert shown.returncode == 0, shown.stderr[-2000:]
        text = re.sub(r"<[^>]+>", "", shown.stdout)
        for item in expected:
            assert item in text, (name, item)
        console = [line for line in shown.stderr.splitlines() if "CONSOLE" in line or "net::ERR" in line]
        assert console == [], console  # no script error, no failed request
