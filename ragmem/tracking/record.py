"""What one evaluation run leaves in MLflow (:func:`record_run`), so MLflow's own views are filled:

- Runs table: params (settings that are set, by section), scores as metrics, counts and endpoint
  usage apart (``count/``, ``usage/``: :func:`ragmem.tracking.lifecycle.metric_key`), the Source
  column (``mlflow.source.*`` tags, :func:`ragmem.tracking.store.source_tags`) and the Dataset column;
- Datasets: the data as the run's input (name, digest = ``data.sha256`` cut to MLflow's 36
  characters, source path, schema of the fields the records use, profile with rows and the sha256);
- Traces: the slowest and failed agent calls, each with the judge's verdict (its reason as the
  rationale) and the example's headline scores as assessments;
- Artifacts: config, summary, the per-example table, ``report.html`` (:mod:`ragmem.report.html`),
  plots, the journal.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from ragmem import judges
from ragmem.version import __version__
from ragmem.metrics import catalogue
from ragmem.metrics.names import PAIRWISE
from ragmem.prompts.templates import PROMPT_VERSION
from ragmem.tracking import files, traces
from ragmem.tracking.lifecycle import log_results, store_errors_muted, tracked_run, TrackedRun
from ragmem.tracking.store import Feedback

_COLSPEC = {"id": "string", "query": "string", "reference_answer": "string", "generated_answer": "string",
            "label": "long", "latency_ms": "double", "session_id": "string"}


def dataset_schema(examples) -> dict[str, Any]:
    """MLflow's column spec of the fields the records use (``contexts`` etc. as arrays of objects)."""
    columns = []
    for name in ("id", "query", "reference_answer", "generated_answer", "label", "latency_ms", "session_id",
                 "contexts", "history", "relevant_context_ids", "relevance", "timings_ms"):
        used = [getattr(e, name) for e in examples if getattr(e, name) not in (None, [], {})]
        if not used:
            continue
        if name in _COLSPEC:
            columns.append({"type": _COLSPEC[name], "name": name, "required": len(used) == len(examples)})
        elif name == "relevant_context_ids":
            columns.append({"type": "array", "items": {"type": "string"}, "name": name, "required": False})
        elif name in ("relevance", "timings_ms"):
            columns.append({"type": "map", "values": {"type": "double"}, "name": name, "required": False})
        else:
            columns.append({"type": "array", "items": {"type": "object", "properties": {
                "text" if name == "contexts" else "content": {"type": "string", "required": True}}},
                "name": name, "required": len(used) == len(examples)})
    return {"mlflow_colspec": columns}


def log_dataset(run: TrackedRun, params: dict[str, str], examples) -> None:
    paths = params["data.path"].split(";")
    name = Path(paths[0]).stem + (f" +{len(paths) - 1} files" if len(paths) > 1 else "")
    tracker, run_id = run.opened()
    tracker.log_dataset(run_id, name, params["data.sha256"], params["data.path"], dataset_schema(examples),
                            {"num_rows": int(params.get("data.n_examples", len(examples))), "files": len(paths),
                             "sha256": params["data.sha256"]})


def assessments(table: pd.DataFrame, params: dict[str, str], ids: list[str]) -> dict[str, list[Feedback]]:
    """Per example id of ``ids``: the judge's verdict (rationale: its reason) and the scores the catalogue
    says are per example (:func:`ragmem.metrics.catalogue.per_example`: ranking at the largest k, every
    metric of one's own; 5 ms each on sqlite)."""
    ks = [int(x) for x in params.get("ranking.k", "10").split(",")]
    scored = [c for c in catalogue.per_example(ks, catalogue.own_of(params)) if c in table.columns]
    judge = judges.source_of(params)
    out: dict[str, list[Feedback]] = {}
    wanted = set(ids)
    for row in table[table["id"].astype(str).isin(wanted)].to_dict("records"):
        items = []
        if row.get("verdict") is not None and not _missing(row["verdict"]):
            reason = row.get("judge_reason")
            items.append(Feedback("verdict", int(row["verdict"]), None if _missing(reason) else str(reason), *judge))
        items += [Feedback(c, float(row[c])) for c in scored if not _missing(row.get(c))]
        out[str(row["id"])] = items
    return out


def write_back_assessments(uri: str, table, params: dict[str, str], run_id: str) -> dict[str, int]:
    """The verdict and headline scores of every example that came from an application trace (its
    ``trace_id``), as assessments on that trace (:func:`ragmem.tracking.traces.write_back`): added,
    or updated where this or an earlier evaluation put them. ``table``: the per-example table, or a
    streamed run's rows (:class:`_TracedRows`)."""
    if isinstance(table, _TracedRows):
        import pyarrow.parquet as pq  # (pyarrow: read only for a streamed run's table)

        ids_table = pq.read_table(table.path, columns=["id", "trace_id"]).to_pandas()
    elif "trace_id" in table.columns:
        ids_table = table[["id", "trace_id"]]
    else:
        return {"added": 0, "updated": 0}
    pairs = {str(i): str(t) for i, t in zip(ids_table["id"], ids_table["trace_id"]) if not _missing(t)}
    rows = table.rows(list(pairs)) if isinstance(table, _TracedRows) else table
    feedback = assessments(rows, params, list(pairs))
    metadata = {traces.SIGNATURE_KEY: params.get("judge.signature", ""),
                "ragmem.prompt_version": params.get("judge.prompt_version", PROMPT_VERSION),
                "ragmem.version": __version__}
    return traces.write_back(uri, {pairs[i]: items for i, items in feedback.items()}, run_id, metadata)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def record_run(run: TrackedRun, resolved_config: dict[str, Any], params: dict[str, str],
               metrics: dict[str, float | None], counts: dict[str, int], table: pd.DataFrame,
               summary: dict[str, Any], examples=(), outputs=(), max_traces: int = 0,
               extra_files: tuple[Path, ...] = (), report: str | None = None,
               copies_max_rows: int = files.COPIES_MAX_ROWS, write_back: str | None = None) -> int:
    """Log one evaluation run: the dataset as its input, agent traces with assessments, params, metrics (+ counts and ``{metric}_ci_low/high``),
    the resolved config, ``summary.json``, ``report`` as ``report.html`` (the page is made by the caller:
    :func:`ragmem.report.html.run_page`), the per-example table (``examples.parquet``, and up to
    ``copies_max_rows`` rows ``examples.csv`` and the MLflow table ``examples.json``), the plots and ``extra_files`` (the journal). Idempotent (see
    :func:`log_results`; traces are written once). ``write_back``: the tracking URI of the
    application traces the examples came from (``data.traces``), which get the verdicts and scores
    as assessments (:func:`write_back_assessments`). Returns the number of traces.

    The plots and the table's files are made meanwhile on a thread of this process (:func:`_table_files`)."""
    if run.id is None:
        return 0
    with store_errors_muted():  # (an error of the store is raised, and reported once, by the caller)
        return _record_run(run, resolved_config, params, metrics, counts, table, summary, examples, outputs,
                           max_traces, extra_files, report, copies_max_rows, write_back)


def _record_run(run, resolved_config, params, metrics, counts, table, summary, examples, outputs, max_traces,
                extra_files, report, copies_max_rows, write_back) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "plots").mkdir()
        if isinstance(table, (str, Path)):  # a streamed run's examples.parquet: logged as it is
            plots, table_files, table = _from_parquet(Path(table), metrics, tmp, copies_max_rows)
        else:
            plots, table_files = _table_files(table, metrics, tmp, copies_max_rows)
        try:
            if run.logged("input") is None:
                log_dataset(run, params, examples)
                run.mark("input", "1")
            traced = run.logged("traces")
            if traced is None:
                n_traces = run.tracker.log_agent_traces(
                    run.id, summary["experiment"], examples, outputs, max_traces,
                    lambda ids: assessments(table.rows(ids) if isinstance(table, _TracedRows) else table, params, ids))
                run.mark("traces", str(n_traces))
            else:
                n_traces = int(traced)
            if write_back and run.logged("assessed") is None:
                added = write_back_assessments(write_back, table, params, run.id)
                run.mark("assessed", json.dumps(added))
                if added.get("gone"):  # (deleted since they were read: said, never an error after the judge was paid)
                    summary.setdefault("notes", []).append(
                        f"assessments not written on {added['gone']} traces deleted from the store after they were read")
            intervals = {f"{name}_ci_{side}": bound for name, (low, high) in summary.get("ci", {}).items()
                         for side, bound in (("low", low), ("high", high))}
            tags = {"ragmem.judge.unreliable": "true"} if summary.get("judge_unreliable") else {}
            tags.update({f"ragmem.{section}.replied_model": ", ".join(models)
                         for section, models in summary.get("replied_models", {}).items()})
            tags.update((summary.get("traces") or {}).get("tags") or {})  # (a window's, for the windows after it)
            log_results(run, params=params, tags=tags or None,
                        metrics={**metrics, **intervals, **{k: float(v) for k, v in counts.items()},
                                 **{f"n_scored/{k}": float(v["scored"]) for k, v in summary.get("coverage", {}).items()},
                                 "n_traces": float(n_traces)},
                        json_files={"config.json": resolved_config, "summary.json": summary}, files=extra_files,
                        texts={"report.html": report} if report is not None else None)
            for path in plots.result():
                run.tracker.log_file(run.id, path, "plots")
        except BaseException:  # the thread finishes its files before the folder goes
            for pending in (plots, table_files):
                with contextlib.suppress(Exception):
                    pending.result()
            raise
        run.tracker.log_table_files(run.id, table_files.result())
    return n_traces


def _table_files(table: pd.DataFrame, metrics, tmp: str, copies_max_rows: int) -> tuple:
    """The plots, then the table's files (Parquet, and the copies of :func:`ragmem.tracking.files.table_kinds`,
    from one flattened copy), begun on a thread of this process while it logs the rest: on pool
    processes, the table sent to each, a 10k-example ``ragmem run`` peaked at 1,022-1,046 MB of
    PSS (two workers at 222 and 262-344 MB); on the thread, 686-714 MB and no slower
    (``benchmarks/bench_tracked_memory.py``, benchmarks/README.md)."""
    writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ragmem-files")
    plots = writer.submit(files.plot_files, metrics, table["latency_s"], Path(tmp) / "plots")
    kinds = files.table_kinds(len(table), copies_max_rows)
    table_files = writer.submit(files.table_files, table, tmp, "examples", kinds)
    writer.shutdown(wait=False)
    return plots, table_files


class _Done:
    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


def _from_parquet(path: Path, metrics, tmp: str, copies_max_rows: int) -> tuple:
    """The same from a streamed run's Parquet file: its latency column for the plot, the copies
    (read back: at most ``copies_max_rows`` rows), and the rows the traces' assessments read."""
    import pyarrow.parquet as pq

    n_rows = pq.ParquetFile(path).metadata.num_rows
    latency = pq.read_table(path, columns=["latency_s"]).column(0).to_pandas()
    writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ragmem-files")
    plots = writer.submit(files.plot_files, metrics, latency, Path(tmp) / "plots")
    writer.shutdown(wait=False)
    kinds = [kind for kind in files.table_kinds(n_rows, copies_max_rows) if kind != "parquet"]
    copies = files.table_files(files.read_parquet(path), tmp, "examples", kinds) if kinds else []  # (read once)
    return plots, _Done([str(path), *copies]), _TracedRows(path)


class _TracedRows:
    """A streamed run's table as :func:`assessments` reads it: the rows of the traced ids only."""

    def __init__(self, path: Path):
        self.path = path

    def rows(self, ids: list[str]) -> pd.DataFrame:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        return pq.read_table(self.path, filters=pc.field("id").isin(list(ids))).to_pandas()


def record_labels(tracker, run_id: str, *, metrics: dict[str, float | None], summary: dict[str, Any],
                  table: pd.DataFrame, sheet: Path, rows: list[tuple[str, int, str, str]], report: str) -> int:
    """Human labels imported into a finished run (``ragmem labels import``): each as an assessment
    with source HUMAN on its example's trace, the recomputed metrics (``{metric}_ci_low/high`` too),
    the tag ``ragmem.judge.unreliable`` set or taken away, ``summary.json``, ``report.html`` and the
    per-example table replaced, and the sheet as ``labels/<file>``. Returns how many assessments."""
    experiment_id = tracker.client.get_run(run_id).info.experiment_id
    n = tracker.log_human_labels(run_id, experiment_id, rows, source_id=f"ragmem labels import {sheet.name}")
    intervals = {f"{name}_ci_{side}": bound for name, (low, high) in summary.get("ci", {}).items()
                 if name in metrics for side, bound in (("low", low), ("high", high))}
    run = TrackedRun(run_id, tracker)
    if summary.get("judge_unreliable"):
        tracker.set_tags(run_id, {"ragmem.judge.unreliable": "true"})
    elif "ragmem.judge.unreliable" in tracker.tags(run_id):
        tracker.client.delete_tag(run_id, "ragmem.judge.unreliable")
    log_results(run, metrics={**metrics, **intervals}, json_files={"summary.json": summary},
                texts={"report.html": report})
    tracker.client.log_artifact(run_id, str(sheet), "labels")
    with tempfile.TemporaryDirectory() as tmp:
        tracker.log_table_files(run_id, files.table_files(table, tmp, "examples"))
    return n


PAIRWISE_METRICS = PAIRWISE.selectable  # (declared with their facts: ragmem.metrics.names)


def record_pairwise(tracker, experiment: str, result: dict[str, Any]) -> str:
    """A pairwise comparison (:mod:`ragmem.judges.pairwise`) as a run of its own in ``experiment``, linked
    to both runs by the tags ``ragmem.judges.pairwise.run_a`` / ``run_b``: its settings as params, the
    figures as metrics (the judge's usage under ``usage/``), the per-example verdicts and reasons as
    ``pairwise.json``. Returns the run id."""
    a, b = result["run_a"], result["run_b"]
    tags = {"ragmem.kind": "pairwise", "ragmem.judges.pairwise.run_a": a, "ragmem.judges.pairwise.run_b": b}
    low, high = result["win_rate_ci"] or (None, None)
    with tracked_run(tracker, experiment, f"pairwise {a[:8]} vs {b[:8]}", tags=tags) as run:
        log_results(run, params={"judge": "pairwise", "judge.signature": result["judge_signature"],
                                 "criterion": result["criterion"], "rubric": result["rubric"] or "-",
                                 "run_a": a, "run_b": b, "stats.signature": f"bootstrap:{result['resamples']}"
                                 f"|conf:{result['confidence']}|seed:{result['seed']}"},
                    metrics={**{k: result[k] for k in PAIRWISE_METRICS}, "win_rate_ci_low": low,
                             "win_rate_ci_high": high, **result["usage"]},
                    json_files={"pairwise.json": result})
    return run.opened()[1]


def record_testset(tracker, experiment: str, path: Path, sha256: str, params: dict[str, str],
                   metrics: dict[str, float | None], side_files: tuple[Path, ...] = ()) -> str:
    """A generated test set (``ragmem generate``) as a run of its own in ``experiment``: how it was
    made as params (corpus, generator, seed, chunking, keywords), what it holds as metrics, the file
    as an artifact and as the run's dataset (context ``testset``, its source the file written), and
    ``side_files`` (what was dropped, with why) as artifacts. Returns the run id."""
    with tracked_run(tracker, experiment, f"generate {path.name}", tags={"ragmem.kind": "testset"}) as run:
        log_results(run, params=params, metrics=metrics, files=(path, *side_files))
        tracker.log_dataset(run.opened()[1], path.stem, sha256, str(path.resolve()), {"mlflow_colspec": [
            {"type": "string", "name": "query", "required": True},
            {"type": "string", "name": "reference_answer", "required": False},
            {"type": "array", "items": {"type": "string"}, "name": "relevant_context_ids", "required": False}]},
            {"num_rows": int(metrics.get("n_questions") or 0), "sha256": sha256}, context="testset")
    return run.opened()[1]
