"""``ragmem ui`` names the page of the runs (MLflow's UI opens an evaluation's experiment on its GenAI
overview, "Traces 0"): the runs of the experiment of the latest run, a route MLflow's UI bundle has."""

from __future__ import annotations

from pathlib import Path

import mlflow

from ragmem.tracking.ui import runs_page


def test_the_runs_page_of_the_latest_experiment(tmp_path):
    uri = f"sqlite:///{tmp_path / 'ui.db'}"
    assert runs_page(uri) is None  # an empty store: the UI's front page is all there is
    client = mlflow.MlflowClient(uri)
    for name in ("older", "latest"):
        experiment = client.create_experiment(name, artifact_location=str(tmp_path / name))
        client.set_terminated(client.create_run(experiment).info.run_id)
    assert runs_page(uri) == ("latest", f"#/experiments/{experiment}/runs")
    bundle = Path(mlflow.__file__).parent / "server" / "js" / "build" / "static" / "js"
    if bundle.is_dir():  # (a wheel without the UI has no bundle to read)
        assert any("experiments/:experimentId/runs" in p.read_text(errors="ignore") for p in bundle.glob("main.*.js"))
