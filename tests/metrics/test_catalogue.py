"""The metric catalogue: each metric's facts declared once (:mod:`ragmem.metrics.names`) and every view
read from them (:mod:`ragmem.metrics.catalogue`): which way is better is never guessed from a name,
every figure a run prints has its facts, no module outside the catalogue holds a list of metric
names, and a metric added in one family touches nothing else to reach every view."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from mlflow import MlflowClient

import ragmem
from ragmem.metrics import catalogue, names, registry
from ragmem.metrics.base import failed, Family, mean_aggregator, MetricResult, scored_mask
from tests.conftest import ROOT

DEMO = str(ROOT / "ragmem" / "datasets" / "demo_bilingual.json")

#: (name, which way is better): the cases the name-based guess got wrong first, then the others
DIRECTIONS = [
    ("judge_flip_rate", "lower"), ("judge_cost_usd", "lower"), ("judge_tokens_in", "lower"),
    ("embeddings_tokens_out", "lower"), ("generator_tokens_in", "lower"), ("layer_cost_usd", "lower"),
    ("ingest_total_s", "lower"), ("context_tokens_mean", "lower"), ("context_tokens_mean_cat2", "lower"),
    ("latency_p95", "lower"), ("avg_latency", "lower"), ("retrieve_latency_p99", "lower"),
    ("add_latency_p95", "lower"), ("search_latency_p50_cat3", "lower"),
    ("pass_rate", "higher"), ("ndcg_at_7", "higher"), ("hit_rate_at_10", "higher"), ("faithfulness", "higher"),
    ("faithfulness_pass_rate", "higher"), ("judge_label_kappa", "higher"), ("pass_rate_ppi", "higher"),
    ("judge_score_cat1", "higher"), ("evidence_recall", "higher"), ("hit_rate_memory_long", "higher"),
    ("win_rate", "higher"), ("swap_inconsistency", "lower"), ("rubric_tone", "higher"), ("knowledge_retention", "higher"), ("bleu_sentence_mean", "higher"),
    ("n_labelled", None), ("judge_calls", None), ("judge_failures", None), ("undefined_f1", None),
    ("confusion_tp", None), ("rubric_tone_failures", None), ("context_share_rag", None),
    ("judge_threshold_low_pass_rate", None), ("keywords_cache_hit_rate", None), ("n_questions_cat5", None),
]


@pytest.mark.parametrize("name, better", DIRECTIONS)
def test_which_way_is_better_is_declared_never_guessed(name, better):
    assert catalogue.facts(name) is not None, f"{name}: no facts"
    assert catalogue.direction(name) == better
    assert catalogue.lower_is_better(name) is (better == "lower")


def test_a_metric_of_ones_own_is_higher_is_better_unless_it_says_lower():
    assert catalogue.direction("refunds_promised") == "higher"
    assert catalogue.direction("refunds_promised", {"refunds_promised": "lower"}) == "lower"
    assert catalogue.own_of({"metrics.custom.refunds": "target:a:b|source:sha256:1|args:answer|better:lower",
                             "metrics.custom.tone": "target:a:c|source:sha256:2|args:answer"}) == \
        {"refunds": "lower", "tone": "higher"}


def test_every_figure_a_run_prints_has_its_facts():
    """The demo (labels, the reliability figures) and the reference agent (stages, sources, a
    conversation's turns): every metric and count of their summaries is in the catalogue."""
    printed: set[str] = set()
    for config in ("demo.yaml", "reference_agent.yaml"):
        result = ragmem.evaluate(config=str(ROOT / "configs" / config), track=False, journal=False)
        printed |= set(result.summary["metrics"]) | set(result.summary.get("counts", {}))
    assert len(printed) > 120
    assert sorted(n for n in printed if not catalogue.catalogued(n)) == []


def _sources() -> list[Path]:
    return sorted(p for folder in ("ragmem", "flows", "tasks") for p in (ROOT / folder).rglob("*.py")
                  if p.name not in ("names.py", "catalogue.py") or p.parent.name != "metrics")


def test_no_module_outside_the_catalogue_holds_a_list_of_metric_names():
    """A tuple, list or set literal naming two metrics or more is a list the catalogue should derive."""
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                named = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                         and catalogue.family_of(e.value) not in (None, "count")]
                if len(named) >= 2:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {named}")
    assert found == []


#: how the name-based guesses read (``"latency" in name``, ``name.startswith(("n_", ...))``, ...)
GUESSES = re.compile(r"""["']latency["'] in |startswith\(\(["']n_["']|endswith\(\(["']_error["'], ["']_loss["']\)|"""
                     r"""startswith\(\(["']judge_["'], ["']embeddings_["']\)|startswith\(\(["']confusion_["']""")


def test_no_name_based_guess_remains_outside_the_catalogue():
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in _sources()
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if GUESSES.search(line)]
    assert found == []


# -- a metric added in a fixture: its facts in one family's Names, its computation in one Family --

WORDS = "answer_words"  # the answer's length in words: shorter is better (a lower-is-better score)
BREVITY = names.Names("brevity", (names.Metric(WORDS, direction=names.LOWER, unit="tokens", column=WORDS,
                                               watched=True, listed=True),))


def _compute(table: pd.DataFrame, ctx, wanted) -> MetricResult:
    values = [None if failed(row) else float(len(str(row.generated_answer or "").split())) for row in ctx.rows(table)]
    kept = [v for v in values if v is not None]
    return MetricResult(values={WORDS: sum(kept) / len(kept) if kept else None}, columns={WORDS: values})


def _aggregators(table: pd.DataFrame, wanted, zero_division: float, scorer=None) -> dict:
    return {n: mean_aggregator(table[n], scored_mask(table)) for n in wanted if n in table}


@pytest.fixture
def brevity(monkeypatch):
    """The new family: its names beside the others' (the catalogue) and its module in the registry."""
    monkeypatch.setattr(names, "FAMILY_NAMES", (*names.FAMILY_NAMES, BREVITY))
    monkeypatch.setattr(names, "KNOWN", (*names.KNOWN, BREVITY))
    monkeypatch.setattr(registry, "FAMILIES", (*registry.FAMILIES, Family(BREVITY, _compute, _aggregators)))


def _records(tmp_path: Path) -> str:
    path = tmp_path / "sites.jsonl"
    path.write_text("\n".join(json.dumps({"id": f"q{i}", "query": f"where is site {i}?",
                                          "reference_answer": f"site {i} is north",
                                          "contexts": [{"text": f"site {i} is north of the river"}]})
                              for i in range(12)) + "\n", encoding="utf-8")
    return str(path)


def _answering(words: int):
    """An agent whose answers are ``words`` words long, and one or two more on every third query."""
    def agent(query: str) -> dict:
        i = int(re.search(r"\d+", query).group())
        return {"answer": " ".join(["north"] * (words + i % 3)),
                "contexts": [{"text": f"site {i} is north of the river"}]}
    return agent


def test_a_metric_added_in_one_family_reaches_every_view(brevity, tmp_path, shared_store):
    from ragmem.report import html, terminal
    from ragmem.run import windows
    from ragmem.config.loading import RunConfig
    from ragmem.tracking import compare

    tracking = {**shared_store, "max_traces": 4}
    selection = ["pass_rate", "avg_coverage", WORDS]
    data = _records(tmp_path)
    short = ragmem.evaluate(data, agent=_answering(2), tracking=tracking, experiment="catalogue-new",
                            metrics=selection)
    long = ragmem.evaluate(data, agent=_answering(6), tracking=tracking, experiment="catalogue-new",
                           metrics=selection, baseline=short.run_id, gates={WORDS: {"max_regression": 1.0}})
    assert short.metrics[WORDS] == pytest.approx(3.0) and long.metrics[WORDS] == pytest.approx(7.0)
    # the gate reads its direction: four more words is worse (lower is better), beyond the bound of 1
    [gate] = long.summary["gates"]
    assert not gate["passed"] and gate["diff"] == pytest.approx(4.0)
    # the terminal table, among the system's figures, with its interval
    with terminal.out.capture() as printed:
        terminal.print_summary(long.summary, stored=False)
    assert re.search(rf"│ {WORDS}\s+│\s+7\.0000 │ \[", printed.get())
    # the HTML report: a headline figure, and a score on each example
    page = html.run_page(long.summary, long.table)
    assert f"<td>{WORDS}</td>" in page and f"{WORDS} 7.000" in page.replace("\n", "")
    # MLflow: the run's metric, and an assessment on each traced agent call
    client = MlflowClient(shared_store["uri"])
    assert client.get_run(long.run_id).data.metrics[WORDS] == pytest.approx(7.0)
    traces = client.search_traces(locations=[client.get_run(long.run_id).info.experiment_id], run_id=long.run_id)
    assert len(traces) == 4 and all(WORDS in {a.name for a in t.info.assessments} for t in traces)
    # compare: a listed column, the runs sorted best first (fewest words), the pair compared
    table, _, _ = compare.list_runs(client, "catalogue-new", metric=WORDS)
    assert list(table["run_id"][:2]) == [short.run_id, long.run_id]
    paired = compare.paired_comparison(client, short.run_id, long.run_id)
    row = next(r for r in paired["metrics"] if r["metric"] == WORDS)
    assert row["diff"] == pytest.approx(4.0)
    # a window of traffic is compared on it
    cfg = RunConfig.model_validate({"metrics": selection})
    assert WORDS in windows.compared(cfg)


def test_what_ragmem_metrics_exports_is_listed_once_and_each_name_resolves():
    """The package's ``__all__`` is the one list of what the registry exports (the package stays free of
    pandas and loads the registry on first use): every name in it is the registry's own object, and the
    registry keeps no second list to drift from it."""
    import ragmem.metrics as package

    assert not hasattr(registry, "__all__")
    for name in package.__all__:
        assert getattr(package, name) is getattr(registry, name), name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        package.nope  # noqa: B018
