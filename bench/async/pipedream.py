#!/usr/bin/env python3
"""PipeDream and PipeDream-2BW against 1F1B: time per step and loss, on
CPU ranks.

Compiles a Llama's AdamW train step (its LM head apart from its embedding:
PipeDream's stages update at their own pace, and refuse a weight they
share) for P pipeline stages four ways:

- 1F1B: PipeDream-Flush, the synchronous schedule (a flush every step), on
  M microbatches;
- 1F1B stash: the same schedule on the step with 2BW's update rule,
  W(t+1) = W(t) - lr * grad f(W(t-1)) (--weight-stash): the flush's cost
  with 2BW's numerics;
- 2BW: --schedule 2bw, 1F1B without a flush, each step's last backwards run
  amid the next step's forwards;
- PipeDream: --schedule pipedream, each step one microbatch of the same
  batch, each stage updating after its backward, rank r's weights p - r - 1
  updates behind its forwards (a version stashed per step in flight).

Trains each on a token file (this repository's README, byte-level) with
tessera run on P CPU ranks, reads each step's time and loss from
--metrics, prints a table (median ms per step, the speedup over 1F1B, the
final loss) and writes the loss against steps and against seconds as SVG.

Run from the repository root after building:
    python3 bench/async/pipedream.py [--steps 40] [--out bench/async]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parameter_server import run, svg_plot  # noqa: E402

LAYERS, HIDDEN, HEADS, SEQ, BATCH = 4, 128, 4, 64, 16
PIPEDREAM = "PipeDream"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--stages", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--lr", default="0.003")
    parser.add_argument("--out", default="bench/async")
    args = parser.parse_args()
    tessera = os.path.join(args.bin, "tessera")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1")
    modes = [("1F1B", ["--schedule", "1f1b"]),
             ("1F1B stash", ["--schedule", "1f1b", "--weight-stash"]),
             ("2BW", ["--schedule", "2bw"]),
             (PIPEDREAM, ["--schedule", "pipedream"])]
    results = []
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "llama.mlir")
        data = os.path.join(work, "tokens.bin")
        run([tessera, "model", "llama", "--layers", str(LAYERS), "--hidden",
             str(HIDDEN), "--heads", str(HEADS), "--seq", str(SEQ), "--vocab",
             "256", "--batch", str(BATCH), "--sharding", "megatron", "-o",
             model], env)
        run([tessera, "data", "pack", "README.md", "-o", data], env)
        for name, flags in modes:
            plan = os.path.join(work, "plan")
            metrics = os.path.join(work, "metrics.jsonl")
            microbatches = 1 if name == PIPEDREAM else args.microbatches
            run([tessera, "compile", model, "--mesh", "dp=1,tp=1", "--pp",
                 str(args.stages), "--microbatches", str(microbatches),
                 "--train", "adamw", "--lr", args.lr, *flags, "-o", plan],
                env)
            if os.path.exists(metrics):
                os.remove(metrics)
            run([tessera, "run", plan, "--ranks", str(args.stages),
                 "--steps", str(args.steps), "--data", data, "--metrics",
                 metrics], env)
            elapsed, curve, seconds = 0.0, [], []
            for line in open(metrics):
                record = json.loads(line)
                elapsed += record["step_seconds"]
                seconds.append(record["step_seconds"])
                curve.append((record["step"], record["loss"], elapsed))
            results.append((name, curve, statistics.median(seconds[1:])))

    p, m = args.stages, args.microbatches
    print(f"Llama {LAYERS} layers, hidden {HIDDEN}, {HEADS} heads, sequence "
          f"{SEQ}, batch {BATCH}, AdamW lr {args.lr}, {p} stages x {m} "
          f"microbatches (PipeDream: 1, the whole batch) on {p} CPU ranks, "
          f"{args.steps} steps on this README's bytes; 1F1B's bubble "
          f"(p-1)/m = {(p - 1) / m:.2f}")
    base = results[0][2]
    print(f"{'schedule':<12} {'ms/step':>8} {'vs 1F1B':>8} {'final loss':>10}")
    for name, curve, median in results:
        print(f"{name:<12} {1e3 * median:>8.1f} {base / median:>7.2f}x "
              f"{curve[-1][1]:>10.4f}")
    print("ms/step: the median step time after the first; 2BW's and "
          "PipeDream's last steps leave their last backwards to the drain "
          "after the run")
    os.makedirs(args.out, exist_ok=True)
    series = [(name, curve) for name, curve, _ in results]
    svg_plot(os.path.join(args.out, "pipedream_loss_by_step.svg"),
             "Loss against steps: 1F1B, 1F1B with 2BW's stash, 2BW, PipeDream",
             "step",
             series, 0)
    svg_plot(os.path.join(args.out, "pipedream_loss_by_time.svg"),
             "Loss against time: 1F1B, 1F1B with 2BW's stash, 2BW, PipeDream",
             "seconds", series, 2)


if __name__ == "__main__":
    main()
