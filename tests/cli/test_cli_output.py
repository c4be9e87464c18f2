"""The terminal output: tables within 80-120 columns with whole words in their headers, latencies in
ms, counts with the right plural, rows of n/a hidden behind a note; compare takes run-id prefixes and
refuses unknown metric names."""

from __future__ import annotations

import json
import os
import re

import pytest
from rich.console import Console

import ragmem
from ragmem.report import terminal as report
from tests.conftest import ROOT

DEMO = str(ROOT / "ragmem" / "datasets" / "demo_bilingual.json")


@pytest.fixture
def screen(monkeypatch):
    def at(width):
        console = Console(width=width, record=True, force_terminal=False)
        monkeypatch.setattr(report, "out", console)
        return console
    return at


def _sweep_result():
    children = []
    for i, (kind, k) in enumerate([("bm25", 1), ("tfidf", 3), ("hybrid", 5)]):
        children.append({"run_id": f"{i:032x}", "params": {"retriever.type": kind, "retriever.top_k": k,
                                                           "memory.short_window": 4},
                         "metrics": {"ndcg_at_10": 0.7 + i / 100, "reference_coverage": 0.8, "hit_rate_at_10": 0.9,
                                     "avg_latency": 0.0042},
                         "vs_best": {"is_best": i == 2, "diff": -0.02, "p_value": 0.2, "significantly_worse": False},
                         "status": "FINISHED", "error": None})
    return {"experiment": "sweep-retriever", "children": children, "parent_run_id": "p" * 32,
            "objective": {"tie_break": [{"setting": "retriever.top_k", "goal": "minimize"}]},
            "tied_for_best": [c["run_id"] for c in children], "best": {"run_id": children[0]["run_id"],
                                                                         "params": children[0]["params"],
                                                                         "metrics": children[0]["metrics"]}}


@pytest.mark.parametrize("width", [80, 120])
def test_the_sweep_table_fits_and_keeps_its_headers_whole(screen, width):
    from ragmem.run.sweep import parse_sweep

    console = screen(width)
    spec = parse_sweep({"grid": {"retriever.type": ["bm25"], "retriever.top_k": [1], "memory.short_window": [4]},
                        "objective": {"metric": "ndcg_at_10"}})
    report.print_sweep(_sweep_result(), spec)
    text = console.export_text()
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("sweep "))
    table = [line for line in lines[start + 1:start + 7] if line.strip()]  # header, rule, 3 rows
    assert max(len(line.rstrip()) for line in table) <= width
    assert table[0].split() == ["type", "top_k", "window", "ndcg@10", "ref_cov", "lat", "(s)", "Δ", "top", "p", "status"]
    assert "hybrid" in text and "…" not in text
    assert "0.0042" in text and "4.2" not in text.replace("0.0042", "")  # avg_latency 0.0042 s, in seconds
    assert "ref_cov = reference_coverage, ndcg@k = ndcg_at_k, window = short_window, lat = avg_latency" \
        in " ".join(text.split())
    assert "3 configurations tied for best; chosen by tie_break (minimize retriever.top_k)" in " ".join(text.split())


def test_the_summary_shows_seconds_plurals_and_hides_nulls(screen, tmp_path):
    console = screen(100)
    data = tmp_path / "one.json"
    data.write_text(json.dumps([{"id": "a", "query": "q?", "reference_answer": "r", "generated_answer": "r",
                                 "latency_ms": 12.5}]))
    result = ragmem.evaluate(str(data), track=False)
    report.print_summary(result.summary)
    text = " ".join(console.export_text().split())
    assert "1 example, 0 errors" in text and "(ms)" not in text  # latency_ms in, seconds out, as everywhere
    assert "latency_p50 (s) │ 0.0125" in text
    # no labels: the judge's agreement with them is hidden, said once in a note
    assert "note: no labels in the dataset: accuracy/precision/recall/f1 not computed" in text
    assert "│ accuracy" not in text and "│ judge_label_kappa" not in text and "not computed (null): accuracy" not in text
    assert "│ judge_threshold_low_pass_rate" in text  # the keyword judge's threshold moved by 0.1


def test_the_bench_table_hides_rows_that_are_n_a_everywhere(screen):
    console = screen(100)
    report.print_bench({"experiment": "locomo", "n_conversations": 1, "n_questions": 2, "parent_run_id": "p",
                        "methods": [{"method": "a"}, {"method": "b"}],
                        "results_table": [{"method": "a", "F1": 0.5, "J": None, "add p50 (s)": 0.0123},
                                          {"method": "b", "F1": 0.25, "J": None, "add p50 (s)": 0.5}]})
    text = " ".join(console.export_text().split())
    assert "1 conversation, 2 questions" in text and "add p50 (s) │ 0.0123 │ 0.5" in text
    assert "n/a for every method (not shown): J" in text and "│ J " not in text


def test_compare_takes_prefixes_and_refuses_unknown_metrics(tmp_path, shared_store, ragmem_main):
    first = ragmem.evaluate(DEMO, experiment="compare-cli", tracking=shared_store)
    second = ragmem.evaluate(DEMO, experiment="compare-cli", tracking=shared_store, judge={"threshold": 0.5})
    env = {**os.environ, "MLFLOW_TRACKING_URI": shared_store["uri"]}
    done = ragmem_main(["compare", first.run_id[:8], second.run_id[:8], "--metrics", "pass_rate", "--resamples", "200"],
                   env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert f"A = {first.run_id[:8]}" in text and "pass_rate" in text
    assert "settings that differ: judge.signature differs; judge.threshold: 0.7 -> 0.5" in text
    # each run's judge: its kappa with the labels (the demo's threshold 0.5 passes more wrong answers)
    assert f"judge of A: judge_label_kappa {first.metrics['judge_label_kappa']:.4f}" in text
    assert f"judge of B: judge_label_kappa {second.metrics['judge_label_kappa']:.4f}" in text
    kappa = ragmem_main(["compare", first.run_id[:8], second.run_id[:8], "--metrics", "judge_label_kappa",
                         "--resamples", "200"], env=env, cwd=tmp_path)  # logged as judge/label_kappa, named as ever
    assert kappa.returncode == 0 and "judge_label_kappa" in kappa.stdout, kappa.stderr
    bad = ragmem_main(["compare", first.run_id[:8], second.run_id, "--metrics", "nosuch"], env=env, cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip().startswith("error: --metrics 'nosuch': not logged by both runs; known: ")
    assert "pass_rate" in bad.stderr
    listed = ragmem_main(["compare", "-e", "compare-cli", "--metric", "nosuch"], env=env, cwd=tmp_path)
    assert listed.returncode == 2 and "error: --metric 'nosuch': not a metric ragmem computes, and none of the last " \
        "2 runs of 'compare-cli' logged it; logged: " in listed.stderr
    known = ragmem_main(["compare", "-e", "compare-cli", "--metric", "faithfulness_pass_rate"], env=env, cwd=tmp_path)
    assert known.returncode == 0, known.stderr
    bare = ragmem_main(["compare"], env=env, cwd=tmp_path)  # the experiment of the latest run
    assert bare.returncode == 0 and "compare-cli: 2 runs, sorted by pass_rate" in " ".join(bare.stdout.split())
    every = ragmem_main(["compare", first.run_id[:8], second.run_id[:8], "--resamples", "50", "--output", "p.json"],
                        env=env, cwd=tmp_path)
    assert every.returncode == 0, every.stderr
    rows = [r["metric"] for r in json.loads((tmp_path / "p.json").read_text())["metrics"]]
    order = [rows.index(m) for m in ("pass_rate", "avg_coverage", "ndcg_at_10", "bleu", "answer_correctness", "f1")]
    assert order == sorted(order), rows  # as the summary: headline, ranking, generation, LLM metrics, the judge
    header = next(line for line in every.stdout.splitlines() if "metric" in line and "┃" in line)
    from ragmem.report import terminal

    # six columns, and "detectable" on a terminal of 100 columns or more; none of them empty
    assert header.count("┃") == (8 if terminal.out.width >= 100 else 7)
    short = ragmem_main(["compare", "abc"], env=env, cwd=tmp_path)
    assert short.returncode == 2


def test_a_tracking_server_that_does_not_answer_is_one_line(tmp_path, ragmem_main):
    from tests.conftest import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    for args in (["compare", "-e", "x", "--tracking-uri", dead], ["report", "abcd1234", "--tracking-uri", dead]):
        done = ragmem_main(args, cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"error: --tracking-uri {dead}: cannot connect (Connection refused); nothing was read"]
    baseline = ragmem_main(["run", str(ROOT / "configs" / "demo.yaml"), "--baseline", "abcd1234", "--max-regression",
                        "pass_rate=0"], env={**os.environ, "MLFLOW_TRACKING_URI": dead}, cwd=tmp_path)
    assert baseline.returncode == 2 and baseline.stderr.strip().splitlines()[-1] == \
        f"error: tracking.uri {dead}: cannot connect (Connection refused); nothing was read"
    assert not (tmp_path / "summary.json").exists()  # before any work


@pytest.mark.parametrize("args, message", [
    (["compare", "abc"], "error: compare: give two run ids (RUN_A RUN_B) or none, got 1"),
    (["compare", "a", "b", "c"], "error: compare: give two run ids (RUN_A RUN_B) or none, got 3"),
    (["compare", "--metrics", "f1"], "error: compare: --metrics goes with two run ids"),
    (["compare", "a", "b", "--resamples", "0"], "error: --resamples: expected a positive integer, got 0"),
    (["report", "a", "b", "c"], "error: report: give one run id (its report) or two (a diff), got 3"),
    (["report", "abcd1234", "--resamples", "0"], "error: --resamples: expected a positive integer, got 0"),
])
def test_compare_and_report_check_their_arguments_before_opening_any_store(args, message, tmp_path, monkeypatch,
                                                                            ragmem_main):
    from ragmem.cli import app as cli
    from ragmem.cli import services as cli_services

    def opened(*_):
        raise AssertionError("the store was opened")

    for module in (cli, cli_services):
        monkeypatch.setattr(module, "store_client", opened)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    done = ragmem_main(args, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().startswith(message), done.stderr
    assert not (tmp_path / "mlruns").exists()


def test_the_last_line_names_the_store_and_the_report(screen):
    console = screen(120)
    report.print_summary({"run_id": "854e621a" + "0" * 24, "experiment": "demo", "n_examples": 1, "n_errors": 0,
                          "metrics": {"pass_rate": 1.0}, "ci": {}, "params": {}, "counts": {}, "notes": [],
                          "tracking_uri": "sqlite:////home/me/project/mlruns/mlflow.db"})
    last = console.export_text().strip().splitlines()[-1]
    assert last == ("MLflow run 854e621a000000000000000000000000 in experiment 'demo'; stored in "
                    "sqlite:////home/me/project/mlruns/mlflow.db; report: ragmem report 854e621a (browse: ragmem ui)")


@pytest.mark.parametrize("words", [["run"], ["compare"], []])
def test_help_shows_flags_as_flags_and_its_defaults_whole(ragmem_main, monkeypatch, words):
    """typer shows an on/off option's type as <bool>, which reads as if it took a value; and rich
    markup ate a "[default: ...]" in a help text."""
    monkeypatch.setenv("COLUMNS", "160")
    done = ragmem_main([*words, "--help"])
    assert done.returncode == 0, done.stderr
    assert "<bool>" not in done.stdout and "--help" in done.stdout
    if words == ["run"]:
        row = next(line for line in done.stdout.splitlines() if "--verbose" in line)
        assert re.search(r"--verbose\s+-v\s+Show Prefect", row), row  # nothing between the flag and its help
        assert "(default: summary.json)" in done.stdout


def _sweep_store(tmp_path):
    """An experiment as a sweep leaves it: a parent (its sweep.json: the chosen child and those tied
    with it) and 18 children over two settings, logged with MLflow's client; an older run before."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'sweep.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("sweep-wide", artifact_location=str(tmp_path / "artifacts"))
    old = client.create_run(experiment, run_name="before")
    client.log_metric(old.info.run_id, "pass_rate", 0.1)
    client.set_terminated(old.info.run_id)
    parent = client.create_run(experiment, run_name="sweep")
    pid = parent.info.run_id
    client.log_param(pid, "sweep.objective.metric", "ndcg_at_10")
    children = []
    for i, (kind, k) in enumerate((t, k) for t in ("bm25", "tfidf", "a-very-long-hybrid-retriever-name") for k in range(1, 7)):
        child = client.create_run(experiment, run_name=f"c{i}", tags={"mlflow.parentRunId": pid})
        cid = child.info.run_id
        for key, value in (("retriever.type", kind), ("retriever.top_k", k), ("memory.short_window", 4),
                           ("generator.template", f"template number {i} with a long description")):
            client.log_param(cid, key, value)
        for key, value in (("ndcg_at_10", 0.5 + i / 100), ("pass_rate", 0.6 + (i % 3) / 10), ("reference_coverage", 0.8),
                           ("hit_rate_at_10", 0.9), ("latency_p95", 0.01 * (1 + i % 4))):
            client.log_metric(cid, key, value)
        client.set_terminated(cid)
        children.append(cid)
    chosen, tied = children[3], [children[3], children[17], children[9]]
    client.log_dict(pid, {"experiment": "sweep-wide", "objective": {"metric": "ndcg_at_10", "goal": "maximize"},
                          "tied_for_best": tied, "best": {"run_id": chosen}}, "sweep.json")
    client.set_tag(pid, "best_run_id", chosen)
    client.set_terminated(pid)
    return uri, pid, children, chosen, tied


def test_compare_after_a_sweep_reads_well_at_any_width(tmp_path, ragmem_main, monkeypatch):
    """Seen on a sweep: the parent's empty row made every setting differ, the run ids wrapped three
    characters a line at 120 columns and the metrics never showed. Now: the parent is left out and
    said so, the table fits the width (settings left out from the right, said so), a pipe gets it
    whole on one line a run, the metrics that differ come first, and --sweep ranks as the sweep did."""
    uri, parent, children, chosen, tied = _sweep_store(tmp_path)
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri}
    env.pop("COLUMNS", None)
    piped = ragmem_main(["compare", "-e", "sweep-wide", "-n", "18"], env=env, cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    lines = piped.stdout.splitlines()
    rows = [line for line in lines if any(c[:8] in line for c in children)]
    assert len(rows) == 18 and not any(line.strip().startswith(parent[:8]) for line in lines)  # no parent row
    assert "n/a" not in "".join(rows) and "short_window" not in piped.stdout  # (the same in every child)
    assert f"note: 1 parent run left out ({parent[:8]}): their children are the rows; a sweep's ranking: " \
        f"ragmem compare --sweep {parent[:8]}" in piped.stdout and "note: 1 older run not shown (-n 19 lists them)" in piped.stdout
    header = next(line for line in lines if "run" in line.split() and "pass_rate" in line)
    assert header.index("pass_rate") < header.index("ndcg@10") < header.index("latency_p95") < header.index("ref_cov")
    for width in (80, 120):
        env["COLUMNS"] = str(width)
        fitted = ragmem_main(["compare", "-e", "sweep-wide", "-n", "18"], env=env, cwd=tmp_path)
        assert fitted.returncode == 0, fitted.stderr
        assert max(len(line) for line in fitted.stdout.splitlines() if "│" in line or "━" in line or any(
            c[:8] in line for c in children)) <= width
        assert sum(any(c[:8] in line for c in children) for line in fitted.stdout.splitlines()) == 18
        if width == 80:
            assert "left out to fit 80 characters (generator.template" in " ".join(fitted.stdout.split())
    ranked = ragmem_main(["compare", "--sweep", parent[:8]], env=env, cwd=tmp_path)
    assert ranked.returncode == 0, ranked.stderr
    order = [next(c for c in children if c[:8] in line) for line in ranked.stdout.splitlines()
             if any(c[:8] in line for c in children)]
    assert order[0] == chosen and set(order[1:3]) == set(tied) - {chosen}
    assert order[1:3] == sorted(order[1:3], key=children.index, reverse=True)  # tied: by ndcg, best first
    assert "chosen" in next(line for line in ranked.stdout.splitlines() if chosen[:8] in line)
    assert "ranked as the sweep decided" in " ".join(ranked.stdout.split())
    for width in (80, 200):  # the command a sweep's last line suggests, in a narrow and a wide terminal
        env["COLUMNS"] = str(width)
        shown = ragmem_main(["compare", "--sweep", parent[:8]], env=env, cwd=tmp_path)
        lines = shown.stdout.splitlines()
        assert shown.returncode == 0 and len(lines) <= 40, shown.stdout
        header = next(line for line in lines if "decision" in line).split()
        assert {"type", "top_k", "ndcg@10"} <= set(header)  # the grid's settings stay: the metrics go first
        assert max(len(line) for line in lines if "━" in line or any(c[:8] in line for c in children)) <= width
        if width == 80:
            assert "hit@10" not in header and "left out to fit 80 characters" in shown.stdout
    other = ragmem_main(["compare", "--sweep", children[0][:8]], env=env, cwd=tmp_path)
    assert other.returncode == 2 and "not a sweep's parent run" in other.stderr


def test_the_command_turns_mlflows_usage_telemetry_off_unless_the_user_said_otherwise(monkeypatch):
    """MLflow 3 sends usage events to its servers unless told not to; the command sets
    ``MLFLOW_DISABLE_TELEMETRY=true`` (as Prefect's analytics are off for the server ragmem starts),
    and keeps a value the user set."""
    from mlflow.environment_variables import MLFLOW_DISABLE_TELEMETRY

    from ragmem.exits import prepare_environment

    for name in ("MLFLOW_DISABLE_TELEMETRY", "RAGMEM_SOURCE_NAME", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR",
                 "MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "MLFLOW_HTTP_REQUEST_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)  # (each put back as it was after the test)
    prepare_environment(["run", "configs/demo.yaml"])
    assert MLFLOW_DISABLE_TELEMETRY.get() is True
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "false")
    prepare_environment(["run", "configs/demo.yaml"])
    assert MLFLOW_DISABLE_TELEMETRY.get() is False
