#!/usr/bin/env python3
"""GPT train-step time on one rank, two builds of tessera-run side by side.

The sizes of issue 27's table (a GPT AdamW step; PyTorch 1.13 took 395 ms
and 1878 ms on one thread there). Each build compiles the model and runs
its plan with its tessera-run, interleaved and repeated, with one OpenBLAS
thread; the table prints the minimum and median of each build's `--time`
(the mean step after the first), next to the same GPT in PyTorch
(torch_gpt.py, one thread, the minimum step of each run), and the ratios.

Run from the repository root after building, with a baseline build (a copy
of bin/ from an earlier commit, holding tessera and tessera-run):
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
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="a Python with torch (Debian's python3-torch)")
    args = parser.parse_args()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    print(f"{'GPT (L, h, A, s, b, V)':28} {'before min':>10} {'median':>7} "
          f"{'after min':>9} {'median':>7} {'torch min':>9} {'median':>7} "
          f"{'after/before':>12} {'after/torch':>11}")
    torch_gpt = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "torch_gpt.py")
    with tempfile.TemporaryDirectory() as work:
        for size in SIZES:
            layers, hidden, heads, seq, batch, vocab = size
            model = os.path.join(work, "gpt.mlir")
            subprocess.run(
                [os.path.join(args.build, "tessera"), "model", "gpt",
                 "--layers", str(layers), "--hidden", str(hidden), "--heads",
                 str(heads), "--seq", str(seq), "--batch", str(batch),
                 "--vocab", str(vocab), "-o", model], check=True,
                capture_output=True)
            # Each build compiles its own plan: the compiler's share (folds,
            # fusion) counts too.
            plans = {}
            for build in (args.baseline, args.build):
                plans[build] = os.path.join(
                    work, f"gpt{len(plans)}.plan")
                subprocess.run(
                    [os.path.join(build, "tessera"), "compile", model,
                     "--train", "adamw", "-o", plans[build]], check=True,
                    capture_output=True)
            times = {args.baseline: [], args.build: [], "torch": []}
            for _ in range(args.repeats):
                for build in (args.baseline, args.build):
                    out = subprocess.run(
                        [os.path.join(build, "tessera-run"), plans[build],
                         "--steps", str(args.steps), "--time"], check=True,
                        capture_output=True, text=True, env=env).stdout
                    times[build].append(float(
                        re.search(r"time: ([\d.]+) ms", out).group(1)))
                out = subprocess.run(
                    [args.python, torch_gpt, "--layers", str(layers),
                     "--hidden", str(hidden), "--heads", str(heads), "--seq",
                     str(seq), "--batch", str(batch), "--vocab", str(vocab),
                     "--threads", "1", "--steps", str(args.steps)],
                    check=True, capture_output=True, text=True,
                    env=env).stdout
                times["torch"].append(float(
                    re.search(r"torch: ([\d.]+) ms min", out).group(1)))
            before, after = times[args.baseline], times[args.build]
            torch = times["torch"]
            print(f"{str(size):28} {min(before):10.1f} "
                  f"{statistics.median(before):7.1f} {min(after):9.1f} "
                  f"{statistics.median(after):7.1f} {min(torch):9.1f} "
                  f"{statistics.median(torch):7.1f} "
                  f"{min(after) / min(before):12.2f} "
                  f"{min(after) / min(torch):11.2f}")

if __name__ == "__main__":
    main()
