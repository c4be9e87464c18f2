"""A sweep's progress: one overall stage (k/N configurations, ETA) into which the children's own
stages fold, one line per child as it finishes with its objective and interval, and the chosen
configuration marked in the plots."""

from __future__ import annotations

import logging
import time

import matplotlib
import pandas as pd
import pytest

from ragmem.config.loading import resolve_config
from ragmem.run import engine
from ragmem.runtime import progress
from ragmem.tracking import plots
from tests.conftest import write_replayed

matplotlib.use("Agg")


@pytest.fixture
def log_mode(monkeypatch):
    monkeypatch.setenv("RAGMEM_PROGRESS", "log")
    monkeypatch.setenv("RAGMEM_PROGRESS_INTERVAL", "0.2")


def test_each_child_is_announced_as_it_finishes_and_its_own_lines_fold(tmp_path, monkeypatch, log_mode, caplog,
                                                                        ragmem_lines):
    events = ragmem_lines  # (the children's starts below, the ragmem logger's lines, in one list)
    real = engine._evaluate_child

    def child(cfg, *args):
        events.append(f"start threshold={cfg.judge.threshold}")
        return real(cfg, *args)

    monkeypatch.setattr(engine, "_evaluate_child", child)
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    config = resolve_config(None, data=write_replayed(tmp_path, 30), extra={
        "tracking": {"enabled": False}, "metrics": ["accuracy", "avg_coverage"],
        "sweep": {"grid": {"judge.threshold": [0.3, 0.5, 0.7]}, "max_parallel": 1, "objective": {"metric": "accuracy", "goal": "maximize"}}})
    summary = engine.sweep(config)
    assert len(summary["children"]) == 3
    announced = [e for e in events if e.startswith("start ") or e.startswith("sweep: ") and " configurations: " in e]
    assert [e.split(" ->")[0] for e in announced] == [
        "start threshold=0.3", "sweep: 1/3 configurations: threshold=0.3",
        "start threshold=0.5", "sweep: 2/3 configurations: threshold=0.5",
        "start threshold=0.7", "sweep: 3/3 configurations: threshold=0.7"]  # each as it finishes
    first = next(e for e in announced if e.startswith("sweep: 1/3"))
    accuracy = summary["children"][0]["metrics"]["accuracy"]
    assert first.startswith(f"sweep: 1/3 configurations: threshold=0.3 -> accuracy={accuracy:.4f} [")
    info = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert not any(m.startswith("agent + judge:") for m in info)  # a child's own line: folded
    assert not any(m.startswith(("agent:", "judge:", "metrics", "logging to MLflow")) for m in info)
    assert len(info) == len(set(info)), "\n".join(info)  # never the same line twice


def test_a_folded_stage_is_counted_but_not_shown(log_mode):
    with progress.stage("sweep", 2, unit="configurations") as overall, progress.fold(overall):
        assert progress.folded()
        with progress.stage("agent", 10) as inner:
            inner.advance(10)
            assert inner not in progress._WATCHER.stages and overall in progress._WATCHER.stages
        overall.advance(1)
        assert overall.line().startswith("sweep: 1/2 configurations (50%)")
    assert not progress.folded()


def test_a_stalled_stage_on_a_short_interval_never_logs_the_same_line_twice(log_mode, caplog):
    # (CI: at 0.2 s a line said "none finished for 1 s" up to five times; its whole seconds are what changes)
    caplog.set_level(logging.INFO, logger="ragmem")
    with progress.stage("judge", 4) as stalled:
        deadline = time.monotonic() + 60
        while len({r.getMessage() for r in caplog.records}) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        stalled.advance(4)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("judge: 0/4")]
    assert len(lines) >= 3 and len(lines) == len(set(lines)), lines
    assert all(line.startswith("judge: 0/4 (0%), 0.0/s, none finished for ") for line in lines)  # (and a line each second)


def test_the_plots_mark_the_chosen_configuration():
    table = pd.DataFrame({"run_id": ["a", "b", "c"], "retriever.top_k": [1, 3, 5], "ndcg_at_10": [0.5, 0.7, 0.6]})
    figure = plots.metric_by_setting_figure(table, "ndcg_at_10", ["retriever.top_k"], chosen="b")
    (ax,) = figure.axes
    stars = [c for c in ax.collections if c.get_label() == "chosen"]
    assert len(stars) == 1 and stars[0].get_offsets().tolist() == [[1.0, 0.7]]
    figure = plots.pareto_figure([0.1, 0.2, 0.3], [0.5, 0.7, 0.6], ["k=1", "k=3", "k=5"], [0, 1], "ndcg_at_10",
                                 "avg_latency", chosen=1)
    (ax,) = figure.axes
    stars = [c for c in ax.collections if c.get_label() == "chosen: k=3"]
    assert len(stars) == 1 and stars[0].get_offsets().tolist() == [[0.2, 0.7]]  # (seconds, as everywhere)
    unmarked = plots.metric_by_setting_figure(table, "ndcg_at_10", ["retriever.top_k"])
    assert not [c for c in unmarked.axes[0].collections if c.get_label() == "chosen"]
