#!/usr/bin/env python3
"""Activation memory and all-to-all bytes per device against context
parallelism (DeepSpeed-Ulysses, `tessera model --context-parallel
ulysses`).

Compiles a long-sequence GPT's AdamW train step on cp = 1, 2, 4 and 8
(dp = tp = 1) and reports, per device, the compiled peak of activations
plus communication buffers (from `tessera compile`'s memory line) against
the goal of 1/cp of the one-device peak, and the all_to_all bytes each
device sends per step, read from the partitioned program (each exchange
keeps 1/cp of its operand and sends the rest), against the analytic
value: four exchanges of a [b, s/cp, h] activation per layer forward
(queries, keys, values, output) and four backward, each sending
(cp - 1)/cp of it.

Run from the repository root after building:
    python3 bench/partition/context_parallel.py
"""

import argparse
import os
import re
import subprocess
import tempfile

LAYERS, HIDDEN, HEADS, SEQ, BATCH = 4, 512, 16, 8192, 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default="build/bin")
    args = parser.parse_args()
    tessera = os.path.join(args.bin, "tessera")
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt.mlir")
        subprocess.run([tessera, "model", "gpt", "--layers", str(LAYERS),
                        "--hidden", str(HIDDEN), "--heads", str(HEADS),
                        "--seq", str(SEQ), "--vocab", "256", "--batch",
                        str(BATCH), "--sharding", "megatron",
                        "--context-parallel", "ulysses", "-o", model],
                       check=True, capture_output=True)
        print(f"GPT {LAYERS} layers, hidden {HIDDEN}, {HEADS} heads, "
              f"sequence {SEQ}, batch {BATCH}, f32, AdamW, fused attention")
        print(f"{'cp':>3} {'activations MB':>15} {'+ comm MB':>10} "
              f"{'x of cp=1':>10} {'goal 1/cp':>10} {'all_to_all MB':>14} "
              f"{'analytic MB':>12}")
        base = None
        for cp in (1, 2, 4, 8):
            mesh = f"dp=1,cp={cp},tp=1"
            output = subprocess.run(
                [tessera, "compile", model, "--mesh", mesh, "--train",
                 "adamw", "-o", os.path.join(work, "gpt.plan")],
                check=True, capture_output=True, text=True).stdout
            peak = re.search(r"memory at the peak: .*activations (\d+), "
                             r"communication (\d+)", output)
            activations, communication = int(peak[1]), int(peak[2])
            part = os.path.join(work, "part.mlir")
            subprocess.run([tessera, "compile", model, "--mesh", mesh,
                            "--train", "adamw", "--emit=partitioned", "-o",
                            part], check=True, capture_output=True)
            sent = 0
            with open(part) as program:
                for shape in re.findall(r"dist\.all_to_all .*: tensor<"
                                        r"([0-9x]+)xf32> ->", program.read()):
                    elements = 1
                    for d in shape.split("x"):
                        elements *= int(d)
                    sent += 4 * elements * (cp - 1) / cp
            analytic = 8 * LAYERS * 4 * BATCH * SEQ * HIDDEN / cp * (cp - 1) / cp
            total = activations + communication
            base = base or total
            print(f"{cp:>3} {activations / 1e6:>15.1f} {total / 1e6:>10.1f} "
                  f"{total / base:>10.3f} {1 / cp:>10.3f} "
                  f"{sent / 1e6:>14.1f} {analytic / 1e6:>12.1f}")


if __name__ == "__main__":
    main()
