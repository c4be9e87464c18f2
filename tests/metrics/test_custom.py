"""Metrics of one's own (``metrics.custom``): a Python function of one example, aggregated like any
metric (interval, paired comparison, gate, chunks), its failures contained and counted per example,
its source hash in its signature; named by ``module:function`` in a config or given as a callable."""

from __future__ import annotations

import json
import math
import re
import sys

import mlflow
import pytest

import ragmem
from ragmem.errors import ConfigError
from ragmem.metrics import custom
from ragmem.tracking.compare import paired_comparison

N = 40
ORDER = re.compile(r"\bORD-\d{6}\b")


def order_id_format(answer):
    """1 when the answer quotes an order id as ORD-dddddd; raises on an answer it cannot read."""
    if answer.startswith("<<"):
        raise ValueError("unreadable answer")
    return bool(ORDER.search(answer))


def _records(tmp_path, name="orders.jsonl"):
    rows = [{"id": f"o{i}", "query": f"Where is order {i}?", "reference": f"Order ORD-{100000 + i} ships on day {i}.",
             "contexts": [f"Order ORD-{100000 + i} ships on day {i}."]} for i in range(N)]
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _agent(good_every: int):
    """Quotes the order id on every ``good_every``-th query; the 7th answer cannot be read."""
    def answer(query):
        i = int(query.split()[3].rstrip("?"))
        if i == 7:
            return "<<garbled>>"
        return f"Order ORD-{100000 + i} ships on day {i}." if i % good_every == 0 else f"Your order ships on day {i}."
    answer.__name__ = f"agent_{good_every}"
    return answer


def _truth(good_every: int) -> float:
    scored = [i for i in range(N) if i != 7]
    return sum(i % good_every == 0 for i in scored) / len(scored)


def test_a_regex_metric_from_the_api_with_an_interval_a_gate_a_failure_and_a_paired_comparison(tmp_path, monkeypatch,
                                                                                                shared_store):
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)  # (the session's store: a new one would be created for this test alone)
    data = _records(tmp_path)
    runs = {}
    for every in (1, 2):
        result = ragmem.evaluate(data, agent=_agent(every), experiment="own", metrics={"custom": [order_id_format]},
                                 gates={"order_id_format": {"min": 0.9}}, stats={"resamples": 300},
                                 tracking={**shared_store, "max_traces": 0})
        runs[every] = result
        metrics, summary = result.metrics, result.summary
        # the value: the mean over the 39 examples the function could read (the planted truth)
        assert metrics["order_id_format"] == pytest.approx(_truth(every))
        # the raising example: null, its reason kept, counted as the function's failure (never a 0)
        assert metrics["order_id_format_failures"] == 1
        row = result.table.set_index("id").loc["o7"]
        assert row["order_id_format"] is None or math.isnan(row["order_id_format"])
        assert row["order_id_format_error"] == "ValueError: unreadable answer"
        assert any("order_id_format: its function failed on 1 of 40 answered examples" in n for n in summary["notes"])
        # an interval, like any metric's
        low, high = summary["ci"]["order_id_format"]
        assert low <= metrics["order_id_format"] <= high and high > low or every == 1
        # a gate on it
        gate = next(g for g in summary["gates"] if g["metric"] == "order_id_format")
        assert gate["passed"] is (every == 1)
    assert runs[1].metrics["order_id_format"] == 1.0
    # the signature: the function's target and source hash, as a param of the run
    client = mlflow.MlflowClient(shared_store["uri"])
    params = client.get_run(runs[2].run_id).data.params
    assert params["metrics.custom.order_id_format"] == (
        f"target:given:{__name__}.order_id_format|source:sha256:{custom.source_hash(order_id_format)}|args:answer")
    # the paired comparison of the two runs reads the metric from their tables (no config needed)
    compared = paired_comparison(client, runs[1].run_id, runs[2].run_id, ["order_id_format"], resamples=500)
    row = next(r for r in compared["metrics"] if r["metric"] == "order_id_format")
    assert row["diff"] == pytest.approx(_truth(2) - 1.0)
    assert row["n_shared"] == N and row["coverage_b"] == {"scored": N - 1, "of": N} and row["p_value"] < 0.05


def test_a_metric_named_in_a_config_reads_what_it_names_and_chunks_give_the_same_value(tmp_path, monkeypatch):
    (tmp_path / "own_checks.py").write_text(
        "def ratio(answer, reference, example):\n"
        "    assert example['answer'] == answer\n"
        "    return None if reference is None else len(answer) / len(reference)\n"
        "def word_count(**fields):\n"
        "    return len(fields['answer'].split()) + len(fields['contexts'])\n", encoding="utf-8")
    records = [{"id": f"r{i}", "query": "q", "answer": "a b c" if i % 2 else "a b",
                "contexts": ["c"] * (i % 3), **({"reference": "abcd"} if i < 6 else {})} for i in range(10)]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    config = {"data": {"files": [{"path": str(path)}]}, "import_paths": [str(tmp_path)],
              "metrics": {"names": ["pass_rate"], "custom": [{"name": "ratio", "target": "own_checks:ratio"},
                                                             {"name": "word_count", "target": "own_checks:word_count"}]}}
    held = ragmem.evaluate(None, config, track=False)
    streamed = ragmem.evaluate(None, {**config, "data": {**config["data"], "chunk_size": 3}}, track=False)
    ratios = [len(r["answer"]) / 4 for r in records[:6]]
    counts = [len(r["answer"].split()) + len(r["contexts"]) for r in records]
    for result in (held, streamed):
        assert result.metrics["ratio"] == pytest.approx(sum(ratios) / 6)
        assert result.metrics["word_count"] == pytest.approx(sum(counts) / 10)
        assert result.metrics["ratio_failures"] == 0
        assert result.summary["coverage"]["ratio"] == {"scored": 6, "of": 10}
    assert held.summary["ci"]["ratio"] == pytest.approx(streamed.summary["ci"]["ratio"], abs=0.05)
    # a function's reply that is not a number fails that example, with the reason
    (tmp_path / "own_bad.py").write_text("def text(answer):\n    return answer\n", encoding="utf-8")
    bad = ragmem.evaluate(None, {**config, "metrics": {"names": ["pass_rate"],
                                                       "custom": [{"name": "text", "target": "own_bad:text"}]}}, track=False)
    assert bad.metrics["text"] is None and bad.metrics["text_failures"] == 10
    assert set(bad.table["text_error"]) == {"returned str, expected a number, a bool or None"}


@pytest.mark.parametrize("entry, message", [
    ({"name": "f1", "target": "checks:ok"}, "metrics.custom[0].name: f1 is a metric of ragmem (choose another name)"),
    ({"name": "Bad-Name", "target": "checks:ok"}, "metrics.custom[0].name: expected lower-case letters"),
    ({"name": "x_failures", "target": "checks:ok"}, "metrics.custom[0].name: x_failures is a name ragmem keeps"),
    ({"name": "ok", "target": "checks"}, "metrics.custom[0].target: expected 'module:function', got 'checks'"),
    ({"name": "ok", "target": "nowhere_xyz:ok"}, "metrics.custom[0].target: cannot import module 'nowhere_xyz'"),
    ({"name": "ok", "target": "checks:missing"}, "metrics.custom[0].target: module 'checks' has no attribute 'missing'"),
    ({"name": "ok", "target": "checks:odd"}, "metrics.custom[0]: the function's parameter 'row' is not one it can be given"),
    ({"name": "ok", "target": "checks:VALUE"}, "metrics.custom[0].target: checks:VALUE is not callable"),
    ({"name": "ok", "target": "checks:ok", "direction": "down"}, "metrics.custom[0].direction: expected one of higher, lower"),
])
def test_a_wrong_metric_entry_is_one_line_before_any_agent_call(tmp_path, monkeypatch, entry, message):
    monkeypatch.delitem(sys.modules, "checks", raising=False)  # (each case's own module)
    (tmp_path / "checks.py").write_text("VALUE = 3\ndef ok(answer):\n    return 1\ndef odd(row):\n    return 1\n",
                                        encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    calls = []
    with pytest.raises(ConfigError) as raised:
        ragmem.evaluate(_records(tmp_path), agent=lambda q: calls.append(q) or "a", track=False,
                        metrics={"custom": [entry]})
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    assert calls == []


def test_two_metrics_of_one_name_and_a_gate_on_an_unknown_name_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"metrics.custom\[1\].name: ok is named twice"):
        ragmem.evaluate(_records(tmp_path), track=False, agent=lambda q: "a",
                        metrics={"custom": [{"name": "ok", "target": "m:a"}, {"name": "ok", "target": "m:b"}]})
    with pytest.raises(ConfigError, match=r"gates.okay: unknown metric"):
        ragmem.evaluate(_records(tmp_path), track=False, agent=lambda q: "a", gates={"okay": {"min": 1}},
                        metrics={"custom": [{"name": "ok", "target": "m:a"}]})


def test_a_function_given_from_the_api_is_refused_for_dask_workers(tmp_path):
    with pytest.raises(ConfigError, match=r"^metrics.custom\[0\].target: a function given from the Python API exists "
                                          r"only in this process, and orchestration.task_runner dask"):
        ragmem.evaluate(_records(tmp_path), track=False, agent=lambda q: "a", metrics={"custom": [order_id_format]},
                        orchestration={"task_runner": "dask"})


def test_the_source_hash_tells_two_versions_of_a_function_apart():
    def a(answer):
        return 1

    def b(answer):
        return 2
    assert custom.source_hash(a) != custom.source_hash(b)
    assert custom.source_hash(a) == custom.source_hash(a) and len(custom.source_hash(a)) == 12


def promises_a_refund(answer):
    """1 when the answer promises a refund (a thing to see less of: lower is better)."""
    return "refund" in answer.lower()


def _promising(every: int):
    def answer(query):
        i = int(query.split()[3].rstrip("?"))
        return f"A refund for order {i} is on its way." if i % every == 0 else f"Order {i} ships on day {i}."
    answer.__name__ = f"promising_{every}"
    return answer


def test_a_metric_of_ones_own_declares_its_direction_and_is_written_back_onto_the_traces(tmp_path, monkeypatch,
                                                                                         shared_store):
    """``direction: lower`` is in its signature, the baseline gate and compare read it; its score on each
    traced agent call is an assessment beside the built-in ones."""
    from ragmem.tracking.compare import list_runs

    monkeypatch.chdir(tmp_path)
    data = _records(tmp_path)
    own = {"custom": [{"name": "promises_a_refund", "target": promises_a_refund, "direction": "lower"}]}
    tracking = {**shared_store, "max_traces": 5}
    few = ragmem.evaluate(data, agent=_promising(10), experiment="own-lower", metrics=own, tracking=tracking)
    many = ragmem.evaluate(data, agent=_promising(2), experiment="own-lower", metrics=own, tracking=tracking,
                           baseline=few.run_id, gates={"promises_a_refund": {"max_regression": 0.05}})
    assert few.metrics["promises_a_refund"] == pytest.approx(0.1) and many.metrics["promises_a_refund"] == 0.5
    [gate] = many.summary["gates"]  # more refunds promised: worse, beyond the bound
    assert not gate["passed"] and gate["ci_low"] > 0.05
    client = mlflow.MlflowClient(shared_store["uri"])
    assert client.get_run(many.run_id).data.params["metrics.custom.promises_a_refund"].endswith("|better:lower")
    table, _, _ = list_runs(client, "own-lower", metric="promises_a_refund")
    assert list(table["run_id"]) == [few.run_id, many.run_id]  # fewest promises first
    run = client.get_run(many.run_id)
    traces = client.search_traces(locations=[run.info.experiment_id], run_id=many.run_id)
    assert len(traces) == 5
    by_id = many.table.set_index("id")
    for trace in traces:
        found = {a.name: a for a in trace.info.assessments}
        example = trace.info.tags["ragmem.example_id"]
        assert found["promises_a_refund"].feedback.value == pytest.approx(by_id.loc[example, "promises_a_refund"])
        assert "verdict" in found


def test_an_infinite_score_fails_its_examples_and_can_never_pass_a_gate(tmp_path, monkeypatch):
    """A function that returns inf (a division by a zero it did not expect): each such example fails with
    its reason, the metric's mean stays finite, and a gate on a metric of only infinite values fails
    (null), where the mean inf had passed `min`."""
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))

    def ratio(answer):
        return float("inf") if "Paris" in answer else 0.5

    records = [{"id": f"q{i}", "query": "q", "generated_answer": "Paris" if i % 2 else "Rome", "reference_answer": "r"}
               for i in range(10)]
    mixed = ragmem.evaluate(records, track=False, metrics={"custom": [ratio]}, gates={"ratio": {"min": 0.1}})
    assert mixed.metrics["ratio"] == 0.5 and mixed.metrics["ratio_failures"] == 5
    assert mixed.table.set_index("id").loc["q1", "ratio_error"] == "returned inf, expected a finite number"

    def always(answer):
        return float("-inf")

    only = ragmem.evaluate(records, track=False, metrics={"custom": [always]}, gates={"always": {"max": 1.0}})
    assert only.metrics.get("always") is None and not only.summary["gates"][0]["passed"]
