#!/usr/bin/env python3
"""GPT train-step time on one rank, two builds of tessera-run side by side.

The sizes of issue 27's table (a GPT AdamW step; PyTorch 1.13 took 395 ms
and 1878 ms on one thread there). Each plan is compiled once by this build
and run by both builds' tessera-run, interleaved and repeated, with one
OpenBLAS thread; the table prints the minimum and median of each build's
`--time` (the mean step after the first) and their ratio.

Run from the repository root after building, with a baseline build (a copy
of bin/ from an earlier commit, holding tessera-run):
    python3 bench/runtime/step_time.py --baseline /tmp/old
"""

import argparse
import os
import re
import statistics
import subprocess
import tempfile

# layers, hidden, heads, seq, batch, vocab
SIZES = [(4, 256, 4, 128, 8, 1024), (6, 512, 8, 256, 4, 4096)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build/bin")
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    print(f"{'GPT (L, h, A, s, b, V)':32} {'before min':>11} {'median':>8} "
          f"{'after min':>10} {'median':>8} {'after/before':>12}")
    with tempfile.TemporaryDirectory() as work:
        for size in SIZES:
            layers, hidden, heads, seq, batch, vocab = size
            model = os.path.join(work, "gpt.mlir")
            plan = os.path.join(work, "gpt.plan")
            subprocess.run(
                [os.path.join(args.build, "tessera"), "model", "gpt",
                 "--layers", str(layers), "--hidden", str(hidden), "--heads",
                 str(heads), "--seq", str(seq), "--batch", str(batch),
                 "--vocab", str(vocab), "-o", model], check=True,
                capture_output=True)
            subprocess.run(
                [os.path.join(args.build, "tessera"), "compile", model,
                 "--train", "adamw", "-o", plan], check=True,
                capture_output=True)
            times = {args.baseline: [], args.build: []}
            for _ in range(args.repeats):
                for build in times:
                    out = subprocess.run(
                        [os.path.join(build, "tessera-run"), plan, "--steps",
                         str(args.steps), "--time"], check=True,
                        capture_output=True, text=True, env=env).stdout
                    times[build].append(float(
                        re.search(r"time: ([\d.]+) ms", out).group(1)))
            before, after = times[args.baseline], times[args.build]
            print(f"{str(size):32} {min(before):11.1f} "
                  f"{statistics.median(before):8.1f} {min(after):10.1f} "
                  f"{statistics.median(after):8.1f} "
                  f"{min(after) / min(before):12.2f}")


if __name__ == "__main__":
    main()
