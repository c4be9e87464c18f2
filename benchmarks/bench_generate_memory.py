"""Time and peak memory of ``ragmem generate --offline`` on a large synthetic corpus: how much the
command holds beyond its own start (about 240 MB of imports) per document read.

    python benchmarks/bench_generate_memory.py [--documents 5000] [--sentences 40] [--n 1000]
    python benchmarks/bench_generate_memory.py --one-file-mb 1024 [--n 100]

Writes ``--documents`` .txt files of ``--sentences`` sentences of 12 words each (drawn with a fixed
seed from 20,000 made-up words: about 3.8 KB a file, 40 chunks at the default chunking), then runs the
command in a fresh process on them and on a one-file corpus, and prints each one's wall time and peak
resident memory (``ru_maxrss`` of the child), e.g.
``documents=5000 chunks=200000 wall=13.5 s peak=565 MB (one file: 238 MB)``.

``--one-file-mb N``: instead, ONE text file of N MB (sentences of the same made-up words, 64 blocks
of 1 MB drawn in a seeded order), through the same command: a file of any size is read as it
streams and its chunks sampled to ``generate.max_chunks`` (100,000) as they are read.
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def corpus(root: Path, documents: int, sentences: int) -> None:
    rng = random.Random(1)
    words = [f"term{i}" for i in range(20000)]
    root.mkdir(parents=True)
    for d in range(documents):
        text = ". ".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(sentences)) + "."
        (root / f"d{d:05d}.txt").write_text(text, encoding="utf-8")


def one_file(path: Path, mb: int) -> None:
    rng = random.Random(2)
    words = [f"term{i}" for i in range(20000)]
    blocks = []
    for _ in range(64):
        sentences, size = [], 0
        while size < 1 << 20:
            sentence = " ".join(rng.choice(words) for _ in range(12)) + ". "
            sentences.append(sentence)
            size += len(sentence)
        blocks.append("".join(sentences) + "\n")
    path.parent.mkdir(parents=True)
    with open(path, "w", encoding="utf-8") as out:
        for _ in range(mb):
            out.write(rng.choice(blocks))


def peak(args: list[str], cwd: Path) -> tuple[float, float, str]:
    """Wall seconds, peak resident MB of one ``ragmem`` process, and what it printed."""
    start = time.perf_counter()
    # a child of its own per measurement: RUSAGE_CHILDREN's maximum is over the children waited for
    done = subprocess.run([sys.executable, "-c", "import resource, subprocess, sys; "
                           "code = subprocess.call(sys.argv[1:]); "
                           "print('PEAK', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
                           "sys.exit(code)", sys.executable, "-m", "ragmem.cli", *args],
                          cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(done.stderr)
    kb = int(re.search(r"PEAK (\d+)", done.stderr).group(1))
    return wall, kb / 1024, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=5000)
    parser.add_argument("--sentences", type=int, default=40)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--one-file-mb", type=int, default=0, help="one text file of this many MB instead")
    args = parser.parse_args()
    if args.one_file_mb:
        with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
            path = Path(tmp) / "one" / "big.txt"
            one_file(path, args.one_file_mb)
            options = ["--offline", "--n", str(args.n), "--no-track", "-o", str(Path(tmp) / "p.jsonl")]
            wall, mb, out = peak(["generate", str(path), *options], Path(tmp))
            said = re.search(r"read 1 document \(([\d,]+) chunks\)[^\n]*", out)
            print(f"one file of {path.stat().st_size / 2**20:,.0f} MiB: wall={wall:.1f} s peak={mb:.0f} MB "
                  f"({said.group(0) if said else out[-300:]})")
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus(root / "docs", args.documents, args.sentences)
        corpus(root / "one", 1, args.sentences)
        options = ["--offline", "--n", str(args.n), "--no-track", "-o"]
        wall, mb, out = peak(["generate", str(root / "docs"), *options, str(root / "p.jsonl")], root)
        _, base, _ = peak(["generate", str(root / "one"), *options, str(root / "q.jsonl")], root)
        chunks = re.search(r"\(([\d,]+) chunks\)", out).group(1)
        print(f"documents={args.documents} chunks={chunks} wall={wall:.1f} s peak={mb:.0f} MB (one file: {base:.0f} MB)")


if __name__ == "__main__":
    main()
