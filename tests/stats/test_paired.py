"""Paired comparisons chunk by chunk (:mod:`ragmem.stats.paired_runs`): the same rows as the two tables aligned
and compared whole (the oracle: :func:`ragmem.stats.intervals.paired` on aligned aggregators), whatever the
chunk size, the order of B's rows or the examples only one run has; read from Parquet files a
chunk at a time, never whole."""

import numpy as np
import pandas as pd
import pytest

from ragmem.stats import intervals as stats, paired_runs as paired
from ragmem.tracking import files

NAMES = ["accuracy", "precision", "f1", "avg_coverage", "avg_latency", "latency_p50", "latency_p95"]


def _table(n: int, seed: int, start: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    latency = rng.exponential(1.0, n)
    latency[rng.random(n) < 0.05] = np.nan  # some calls not timed
    coverage = rng.random(n)
    coverage[rng.random(n) < 0.05] = np.nan  # some not computable
    return pd.DataFrame({"id": [f"q{i}" for i in range(start, start + n)], "error": [None] * n, "coverage": coverage,
                         "label": rng.integers(0, 2, n), "verdict": rng.integers(0, 2, n), "latency_s": latency})


def _runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    """A, and B: 2,400 of A's examples (better coverage), shuffled, and 300 of its own."""
    a, shared = _table(2_700, seed=1), _table(2_400, seed=2, start=300)
    shared["coverage"] = (a["coverage"].to_numpy()[300:] + 0.02).clip(max=1.0)
    b = pd.concat([shared, _table(300, seed=3, start=5_000)], ignore_index=True)
    return a, b.sample(frac=1.0, random_state=4).reset_index(drop=True)


def _oracle(a: pd.DataFrame, b: pd.DataFrame, resamples: int, seed: int) -> dict[str, dict]:
    """Each metric of the two tables aligned on their shared ids, compared whole."""
    ids_b = set(b["id"])
    shared = [i for i in a["id"] if i in ids_b]
    a, b = a.set_index("id").loc[shared].reset_index(), b.set_index("id").loc[shared].reset_index()
    aggs_a, aggs_b = stats.aggregators(a, NAMES), stats.aggregators(b, NAMES)
    keys = stats.example_keys(shared)
    return {n: stats.paired(n, aggs_a[n], aggs_b[n], resamples, seed, 0.95, keys).to_dict() for n in NAMES}


def _close(rows: list[dict], expected: dict[str, dict]) -> None:
    assert [r["metric"] for r in rows] == NAMES
    for row in rows:
        want = expected[row["metric"]]
        assert row["n_shared"] == want["n_shared"] == 2_400
        assert row["p_value"] == want["p_value"], row["metric"]  # the same swaps, counted alike
        for key in ("a", "b", "diff", "ci_low", "ci_high"):
            assert row[key] == pytest.approx(want[key], abs=1e-12), (row["metric"], key)


@pytest.mark.parametrize("rows", [700, 1_000_000])
def test_chunk_by_chunk_equals_the_two_tables_aligned_and_compared_whole(rows):
    a, b = _runs()
    found, n_shared = paired.paired_rows(a, b, NAMES, 0.0, None, resamples=200, seed=5, rows=rows)
    assert n_shared == 2_400
    _close(found, _oracle(a, b, 200, 5))
    coverage = next(r for r in found if r["metric"] == "avg_coverage")
    assert coverage["ci_low"] > 0 and coverage["p_value"] < 0.01  # B's +0.02 is found


def test_parquet_files_are_read_a_chunk_at_a_time_never_whole(tmp_path, monkeypatch):
    a, b = _runs()
    tables = []
    for name, table in (("a", a), ("b", b)):
        (tmp_path / name).mkdir()
        tables.append(files.ParquetTable(files.table_file(table, tmp_path / name, "examples", "parquet")))
    read = []
    original = files.ParquetTable.chunks

    def counted(self, rows):
        for chunk in original(self, rows):
            read.append(len(chunk))
            yield chunk

    monkeypatch.setattr(files.ParquetTable, "chunks", counted)
    monkeypatch.setattr(files.ParquetTable, "frame", lambda self: pytest.fail("a table was read whole"))
    found, _ = paired.paired_rows(*tables, NAMES, 0.0, None, resamples=200, seed=5, rows=500)
    assert max(read) == 500 and sum(read) == len(a) + len(b)
    _close(found, _oracle(a, b, 200, 5))


def test_the_classic_bootstrap_compares_the_tables_whole_in_a_order(tmp_path):
    a, b = _runs()
    (tmp_path / "b").mkdir()
    on_disk = files.ParquetTable(files.table_file(b, tmp_path / "b", "examples", "parquet"))
    found, n_shared = paired.paired_rows(a, on_disk, ["avg_coverage"], 0.0, None, resamples=300, seed=2,
                                         bootstrap="classic")
    ids_b = set(b["id"])
    shared = [i for i in a["id"] if i in ids_b]
    aligned_a, aligned_b = (t.set_index("id").loc[shared].reset_index() for t in (a, b))
    want = stats.paired("avg_coverage", stats.aggregators(aligned_a, ["avg_coverage"])["avg_coverage"],
                        stats.aggregators(aligned_b, ["avg_coverage"])["avg_coverage"], 300, 2).to_dict()
    assert n_shared == 2_400 and found[0]["diff"] == pytest.approx(want["diff"], abs=1e-12)
    assert (found[0]["ci_low"], found[0]["ci_high"], found[0]["p_value"]) == (want["ci_low"], want["ci_high"], want["p_value"])


def test_runs_that_share_no_example_give_nothing():
    assert paired.paired_rows(_table(50, 1), _table(50, 2, start=100), NAMES, 0.0, None) == ([], 0)
