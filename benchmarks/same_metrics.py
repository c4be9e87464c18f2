"""Every metric of the shipped configs, recorded by one checkout and compared with another's: what a
refactor must leave exactly as it was.

    python benchmarks/same_metrics.py record OUT [--ragmem PATH]   # run the configs, write OUT/*.json
    python benchmarks/same_metrics.py diff BEFORE AFTER             # exit 1 when a value differs

``record`` runs, each in one temporary home (its own store and Prefect server, stopped at the end):
``demo``, ``reference_agent``, ``seed_samples`` (from ``../shared/data/seed-samples``, skipped when
absent), ``default --data`` the demo data, and the sweep of ``sweep_retriever`` (18 children). It
keeps each run's metrics and interval ends (a sweep: each child's, by its settings). ``--ragmem``
is the ``ragmem`` executable of the checkout to record (default: the one beside this Python).

``diff`` compares value by value, exactly (floats as written in the JSON). The metrics a live agent
times (``avg_latency``, ``latency_*``, a stage's ``retrieve_latency_*`` and the like: every name
with ``latency`` in it, and anything ending in ``_seconds``) are listed apart: the
reference agent's answers are timed on this machine, so those move from run to run whatever the code.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT.parent / "shared" / "data" / "seed-samples"


def _runs() -> dict[str, list[str]]:
    configs = ROOT / "configs"
    runs = {
        "demo": ["run", str(configs / "demo.yaml")],
        "reference_agent": ["run", str(configs / "reference_agent.yaml")],
        "default_demo": ["run", str(configs / "default.yaml"), "--data",
                         str(ROOT / "ragmem" / "datasets" / "demo_bilingual.json")],
        "sweep_retriever": ["sweep", str(configs / "sweep_retriever.yaml")],
    }
    if (SEED / "evaluation_samples_true.json").is_file():
        files = (f"[{{path: {SEED / 'evaluation_samples_true.json'}, label: 1}}, "
                 f"{{path: {SEED / 'evaluation_samples_false.json'}, label: 0}}]")
        runs["seed_samples"] = ["run", str(configs / "seed_samples.yaml"), "--set", f"data.files={files}"]
    else:
        print(f"seed_samples: skipped ({SEED} not found)", file=sys.stderr)
    return runs


def _values(summary: dict) -> dict[str, object]:
    out = dict(summary.get("metrics", {}))
    for name, (low, high) in summary.get("ci", {}).items():
        out[f"{name} ci_low"], out[f"{name} ci_high"] = low, high
    return out


def record(out: Path, ragmem: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="same-metrics-") as home:
        env = {**os.environ, "RAGMEM_HOME": str(Path(home) / ".ragmem"), "DO_NOT_TRACK": "true"}
        env.pop("MLFLOW_TRACKING_URI", None)
        env.pop("PREFECT_API_URL", None)
        try:
            for name, args in _runs().items():
                target = Path(home) / f"{name}.json"
                done = subprocess.run([ragmem, *args, "--output", str(target)], cwd=home, env=env,
                                      capture_output=True, text=True)
                if done.returncode != 0:
                    sys.exit(f"{name}: ragmem {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")
                payload = json.loads(target.read_text(encoding="utf-8"))
                if args[0] == "sweep":
                    values = {json.dumps(child["params"], sort_keys=True): _values(child)
                              for child in payload["children"]}
                else:
                    values = {"run": _values(payload)}
                (out / f"{name}.json").write_text(json.dumps(values, indent=1, sort_keys=True), encoding="utf-8")
                print(f"{name}: {sum(len(v) for v in values.values())} values from {len(values)} run(s)")
        finally:
            subprocess.run([ragmem, "server", "stop"], cwd=home, env=env, capture_output=True, text=True)


def diff(before: Path, after: Path) -> int:
    differing = 0
    for path in sorted(before.glob("*.json")):
        other = after / path.name
        if not other.is_file():
            print(f"{path.stem}: missing in {after}")
            differing += 1
            continue
        a, b = json.loads(path.read_text()), json.loads(other.read_text())
        same = timed_same = timed_moved = 0
        lines = []
        for run in sorted(set(a) | set(b)):
            va, vb = a.get(run, {}), b.get(run, {})
            for metric in sorted(set(va) | set(vb)):
                timed = "latency" in metric.split()[0] or metric.split()[0].endswith("_seconds")
                if va.get(metric, "absent") == vb.get(metric, "absent"):
                    same += not timed
                    timed_same += timed
                elif timed:
                    timed_moved += 1
                else:
                    lines.append(f"  {run if len(a) > 1 else ''} {metric}: {va.get(metric, 'absent')} -> "
                                 f"{vb.get(metric, 'absent')}")
        runs = f"{len(a)} runs, " if len(a) > 1 else ""
        print(f"{path.stem}: {runs}{same} values identical, {len(lines)} differ; timed: {timed_same} identical, "
              f"{timed_moved} moved")
        if lines:
            print("\n".join(lines))
        differing += len(lines)
    return 1 if differing else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out", type=Path)
    rec.add_argument("--ragmem", default=str(Path(sys.executable).with_name("ragmem")))
    dif = sub.add_parser("diff")
    dif.add_argument("before", type=Path)
    dif.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "record":
        record(args.out, args.ragmem)
    else:
        sys.exit(diff(args.before, args.after))


if __name__ == "__main__":
    main()
