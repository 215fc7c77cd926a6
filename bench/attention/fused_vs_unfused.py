#!/usr/bin/env python3
"""Fused attention (nn.attention) against the unfused ops, on the CPU.

For each sequence length, builds the same model twice with
`tessera model ... --attention fused|unfused`, compiles its AdamW train step
for one device, and reports from one run:
  - the step time: the median of `tessera-run --time` over several runs,
    the two variants alternating so that machine noise hits both;
  - the activations' peak of the compiled memory plan (what `tessera
    compile` prints), which for the unfused model holds every layer's
    [b, heads, s, s] scores and probabilities for the backward.

Run from the repository root after building:
    python3 bench/attention/fused_vs_unfused.py [--model gpt|llama]
        [--device cpu|cuda] [--dtype f32|bf16] [--dropout P]
"""

import argparse
import os
import re
import statistics
import subprocess
import tempfile


def compile_step(args, attention, seq, directory):
    model = os.path.join(directory, f"{attention}-{seq}.mlir")
    plan = os.path.join(directory, f"{attention}-{seq}.plan")
    shape = ["--layers", str(args.layers), "--hidden", str(args.hidden),
             "--heads", str(args.heads), "--seq", str(seq), "--vocab",
             str(args.vocab), "--batch", str(args.batch)]
    if args.model == "llama":
        shape += ["--kv-heads", str(args.kv_heads)]
    if args.dropout > 0:
        shape += ["--dropout", str(args.dropout)]
    subprocess.run([args.tessera, "model", args.model, *shape, "--dtype",
                    args.dtype, "--attention", attention, "-o", model],
                   check=True, capture_output=True)
    precision = ["--precision", "mixed"] if args.dtype != "f32" else []
    out = subprocess.run([args.tessera, "compile", model, "--train", "adamw",
                          *precision, "-o", plan], check=True,
                         capture_output=True, text=True).stdout
    peak = re.search(r"each at its own peak: .*activations (\d+)", out)
    return plan, int(peak.group(1))


def step_time(args, plan):
    out = subprocess.run([args.runner, plan, "--steps", str(args.steps),
                          "--time", "--device", args.device], check=True,
                         capture_output=True,
                         text=True, env=dict(os.environ,
                                             OPENBLAS_NUM_THREADS="1")).stdout
    return float(re.search(r"time: ([0-9.]+) ms per step", out).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["gpt", "llama"], default="gpt")
    parser.add_argument("--seqs", type=int, nargs="+",
                        default=[512, 1024, 2048])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dropout", type=float, default=0.0,
                        help="the models' dropout (fused: inside the "
                        "attention kernels; unfused: nn.dropout of the "
                        "probabilities)")
    parser.add_argument("--tessera", default="build/bin/tessera")
    parser.add_argument("--runner", default="build/bin/tessera-run")
    args = parser.parse_args()
    where = "one CPU thread" if args.device == "cpu" else "one GPU"
    print(f"{args.model}: {args.layers} layers, hidden {args.hidden}, "
          f"{args.heads} heads, batch {args.batch}, {args.dtype}, dropout "
          f"{args.dropout}, AdamW step "
          f"on {where}; median of {args.runs} runs of {args.steps} steps")
    print(f"{'seq':>6} {'fused ms':>10} {'unfused ms':>11} {'time ratio':>11} "
          f"{'fused act MB':>13} {'unfused act MB':>15} {'mem ratio':>10}")
    with tempfile.TemporaryDirectory() as directory:
        for seq in args.seqs:
            plans, peaks, times = {}, {}, {}
            for attention in ("fused", "unfused"):
                plans[attention], peaks[attention] = compile_step(
                    args, attention, seq, directory)
                times[attention] = []
            for _ in range(args.runs):
                for attention in ("fused", "unfused"):
                    times[attention].append(step_time(args, plans[attention]))
            fused = statistics.median(times["fused"])
            unfused = statistics.median(times["unfused"])
            print(f"{seq:>6} {fused:>10.1f} {unfused:>11.1f} "
                  f"{fused / unfused:>11.2f} {peaks['fused'] / 1e6:>13.1f} "
                  f"{peaks['unfused'] / 1e6:>15.1f} "
                  f"{peaks['fused'] / peaks['unfused']:>10.2f}")


if __name__ == "__main__":
    main()
