#!/usr/bin/env python3
"""ZeRO's memory table (Rajbhandari et al. 2020, table 1), compiled.

Compiles the mixed-precision AdamW train step of a 7.5B-parameter GPT (36
layers, h 4096, 32 heads, s 1024, vocabulary 51200; bf16 model, f32 master
weights and moments) on 64 data-parallel devices under ZeRO 0-3, without
running it, and prints the model state of each plan per device (each
category at its own peak, from `tessera compile`) beside the paper's row
for 7.5B parameters at N_d = 64 with K = 12: 120, 31.4, 16.6 and 1.88 GB.

Where Tessera's step differs from the paper's accounting, the columns say
so: at stages 1 and 2 the bf16 copy of the parameters is the cast of the
master shard gathered whole once per step (the communication buffer, which
the model state column adds at those stages), and from stage 2 one unit's
gradient is whole until its reduce-scatter: a block's, whose parameters
are one flat buffer (FSDP's FlatParameter; DeepSpeed's ZeRO-2 holds a
reduce bucket of 5e8 elements instead), which the paper does not count. Run from the repository root
after building:
    python3 bench/zero/paper_table.py
"""

import argparse
import os
import re
import subprocess
import tempfile

PAPER_GB = {0: 120, 1: 31.4, 2: 16.6, 3: 1.88}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessera", default="build/bin/tessera")
    parser.add_argument("--dp", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        model = os.path.join(directory, "gpt.mlir")
        made = subprocess.run(
            [args.tessera, "model", "gpt", "--layers", "36", "--hidden",
             "4096", "--heads", "32", "--seq", "1024", "--vocab", "51200",
             "--batch", str(args.dp), "--dtype", "bf16", "--sharding",
             "megatron", "-o", model], check=True, capture_output=True,
            text=True)
        psi = int(re.search(r"(\d+) parameters", made.stderr).group(1))
        print(f"GPT of {psi / 1e9:.2f}B parameters, mixed precision, "
              f"N_d = {args.dp}; GB per device")
        print("zero  params  grads  optim  communication  model state  "
              "paper's formula  paper (7.5B)")
        nd = args.dp
        formula = {0: 16 * psi, 1: 4 * psi + 12 * psi / nd,
                   2: 2 * psi + 14 * psi / nd, 3: 16 * psi / nd}
        for stage in range(4):
            plan = os.path.join(directory, "step.plan")
            out = subprocess.run(
                [args.tessera, "compile", model, "--mesh", f"dp={nd},tp=1",
                 "--train", "adamw", "--precision", "mixed", "--zero",
                 str(stage), "-o", plan], check=True, capture_output=True,
                text=True).stdout
            peaks = re.search(
                r"each at its own peak: parameters (\d+), gradients (\d+), "
                r"optimizer state (\d+), activations (\d+), communication "
                r"(\d+)", out)
            params, grads, optim, _, communication = (
                int(peaks.group(i)) for i in range(1, 6))
            # The paper's parameters are the 16-bit copy: at stages 1 and 2
            # Tessera's is the gathered communication buffer.
            state = params + grads + optim
            if stage in (1, 2):
                state += communication
            print(f"{stage:4} {params / 1e9:7.2f} {grads / 1e9:6.2f} "
                  f"{optim / 1e9:6.2f} {communication / 1e9:14.2f} "
                  f"{state / 1e9:12.2f} {formula[stage] / 1e9:16.2f} "
                  f"{PAPER_GB[stage]:13}")
        h = 4096
        print(f"from stage 2 the gradients hold one block's whole, "
              f"(12 h^2 + 13 h) * 2 bytes = {(12 * h * h + 13 * h) * 2 / 1e9:.2f}"
              f" GB, next to the shards")


if __name__ == "__main__":
    main()
