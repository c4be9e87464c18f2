"""What each metric family of the default offline suite costs: its seconds and its peak memory.

    python benchmarks/bench_families.py [--n 10000] [--data fresh|pooled] [--resamples 1000]
                                        [--repeats 2] [--families ranking generation ...]

On ``--n`` synthetic bilingual examples (``fresh``: no text repeats, ``benchmarks/fresh.py``;
``pooled``: the contexts drawn from a shared pool, ``bench_vs_ragas.py``), runs in fresh processes,
interleaved ``--repeats`` times:

- ``base``: ``ragmem.evaluate(path, track=False, metrics=["pass_rate"])``: reading the file, the
  table, the verdicts and the judge's reliability figures (always on), the bootstrap, the imports;
- one run per family: the base plus that family's default metrics alone;
- ``all``: every default metric (``ragmem.evaluate(path, track=False)``, what bench_vs_ragas times).

Prints, per run, the best wall time from the evaluation's entry point imported to the result and the
lowest peak PSS of the process tree (its scoring workers included), and what each family adds to the
base: the family's budget. The sum of the families' additions against ``all`` says how much the
families share (keyword sets and tokens computed once per text serve several of them).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_vs_ragas import compile_ragmem, run, write_jsonl  # noqa: E402
from fresh import write_fresh_jsonl  # noqa: E402

_CHILD = """
import json, sys, time
t0 = time.perf_counter()
import ragmem, ragmem.api
t1 = time.perf_counter()
metrics = json.loads(sys.argv[2])
extra = {"metrics": metrics} if metrics is not None else {}
result = ragmem.evaluate(sys.argv[1], track=False, stats={"resamples": int(sys.argv[3])}, **extra)
t2 = time.perf_counter()
print(json.dumps({"compute": t2 - t1, "total": t2 - t0, "rss_mb": 0, "n": result.summary["n_examples"],
                  "metrics": len(result.metrics)}))
"""


def family_metrics() -> dict[str, list[str]]:
    """Each family that the default selection reaches, with the default names it produces."""
    from ragmem.metrics import names, registry

    out = {}
    for family in registry.FAMILIES:
        chosen = [n for n in names.DEFAULT_METRICS if family.expand(n, names.DEFAULT_KS) is not None]
        if chosen and family.name != "verdicts":
            out[family.name] = chosen
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--data", choices=["fresh", "pooled"], default="fresh")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--families", nargs="*", help="only these families (default: every one the default selection reaches)")
    args = parser.parse_args()
    families = family_metrics()
    if args.families:
        families = {k: v for k, v in families.items() if k in args.families}
    runs: dict[str, list[str] | None] = {"base": ["pass_rate"], **{k: ["pass_rate", *v] for k, v in families.items()},
                                         "all": None}
    compile_ragmem()
    best: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.jsonl"
        (write_fresh_jsonl if args.data == "fresh" else write_jsonl)(path, args.n)
        for repeat in range(args.repeats):
            for name, metrics in runs.items():
                side = run(sys.executable, _CHILD, str(path), json.dumps(metrics), str(args.resamples))
                kept = best.setdefault(name, {"compute": side["compute"], "pss": side["rss_mb"]})
                kept["compute"], kept["pss"] = min(kept["compute"], side["compute"]), min(kept["pss"], side["rss_mb"])
                print(f"repeat {repeat + 1} {name}: {side['compute']:.2f} s, {side['rss_mb']:.0f} MB", file=sys.stderr, flush=True)
    base = best["base"]
    print(f"n={args.n} data={args.data} resamples={args.resamples} best of {args.repeats} (seconds from ragmem.api imported; peak PSS of the tree)")
    print(f"{'run':<16}{'seconds':>9}{'peak MB':>9}{'+ s':>8}{'+ MB':>8}  metrics")
    added_s = added_mb = 0.0
    for name, metrics in runs.items():
        kept = best[name]
        plus_s, plus_mb = kept["compute"] - base["compute"], kept["pss"] - base["pss"]
        if name not in ("base", "all"):
            added_s, added_mb = added_s + plus_s, added_mb + plus_mb
        shown = "every default" if metrics is None else ", ".join(metrics[1:] if name != "base" else metrics)
        print(f"{name:<16}{kept['compute']:>9.2f}{kept['pss']:>9.0f}{plus_s:>+8.2f}{plus_mb:>+8.0f}  {shown[:70]}")
    whole = best["all"]
    print(f"families' additions summed: {added_s:+.2f} s, {added_mb:+.0f} MB; all over base: "
          f"{whole['compute'] - base['compute']:+.2f} s, {whole['pss'] - base['pss']:+.0f} MB")


if __name__ == "__main__":
    main()
