#!/usr/bin/env python3
"""Hogwild against locked updates and one thread: SGD steps per second and
the loss against wall time on the click-through-rate model.

Builds `tessera model ctr` (hashed features, an embedding bag and logistic
regression, batches drawn each step; its loss is the excess log-loss over
the generating model's, optimum 0), compiles its SGD step as a
parameter-server plan, and runs its workers as threads of one process on
one shared copy of the parameters (tessera-run --hogwild): one thread
(plain SGD), THREADS threads lock-free, and THREADS threads with a lock
around each read of the parameters and each update. Prints steps per
second and the mean loss over the last steps, and writes the loss against
seconds as SVG.

Run from the repository root after building:
    python3 bench/async/hogwild.py [--buckets 16384] [--steps 20000]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from parameter_server import svg_plot  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--buckets", type=int, default=16384)
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lr", default="2")
    parser.add_argument("--out", default="bench/async")
    args = parser.parse_args()
    tessera = os.path.join(args.bin, "tessera")
    runner = os.path.join(args.bin, "tessera-run")
    runs = []
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "ctr.mlir")
        plan = os.path.join(work, "ctr.plan")
        subprocess.run([tessera, "model", "ctr", "--buckets",
                        str(args.buckets), "--features", str(args.features),
                        "--batch", str(args.batch), "-o", model], check=True,
                       capture_output=True)
        subprocess.run([tessera, "compile", model, "--train", "sgd", "--lr",
                        args.lr, "--ps", "1", "-o", plan], check=True,
                       capture_output=True)
        for name, flags in [("1 thread", ["--hogwild", "1"]),
                            (f"{args.threads} threads lock-free",
                             ["--hogwild", str(args.threads)]),
                            (f"{args.threads} threads locked",
                             ["--hogwild", str(args.threads), "--locked"])]:
            metrics = os.path.join(work, "metrics.jsonl")
            subprocess.run([runner, plan, "--steps", str(args.steps),
                            "--metrics", metrics, *flags], check=True,
                           capture_output=True)
            records = [json.loads(line) for line in open(metrics)]
            # The loss, averaged over the last 50 steps, when each step ended.
            records.sort(key=lambda r: r["seconds"])
            curve = []
            for i, record in enumerate(records):
                window = records[max(0, i - 49):i + 1]
                curve.append((record["step"],
                              sum(r["loss"] for r in window) / len(window),
                              record["seconds"]))
            runs.append((name, curve, records))
    print(f"CTR: {args.buckets} buckets x 4, {args.features} features, batch "
          f"{args.batch}, SGD lr {args.lr}, {args.steps} steps on this "
          f"machine's {os.cpu_count()} cores")
    print(f"{'run':<24} {'steps/s':>9} {'speedup':>8} "
          f"{'loss, last 500 steps':>21}")
    base = None
    for name, curve, records in runs:
        rate = len(records) / records[-1]["seconds"]
        base = base or rate
        last = sorted(records, key=lambda r: r["step"])[-500:]
        loss = sum(r["loss"] for r in last) / len(last)
        print(f"{name:<24} {rate:>9.0f} {rate / base:>8.2f} {loss:>21.4f}")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "hogwild_loss_by_time.svg")
    svg_plot(path, "Hogwild: loss (excess over the optimum) against seconds",
             "seconds", [(name, curve) for name, curve, _ in runs], 2)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
