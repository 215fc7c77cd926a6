#!/usr/bin/env python3
"""The activation memory `tessera plan` charges a pipelined plan against the
compiled stages' activation peaks (the rank holding the most), side by side,
for each schedule, stage count and microbatch count.

Run from the repository root after building:
    python3 bench/pipeline/activations.py
    python3 bench/pipeline/activations.py --tp 2 --sequence-parallel
    python3 bench/pipeline/activations.py --dp 2 --zero 3 --recompute full
    python3 bench/pipeline/activations.py --precision mixed
"""

import argparse
import json
import re
import subprocess
import tempfile


def compiled(args, model, pp, m, schedule):
    command = [args.tessera, "compile", model, "--mesh",
               f"dp={args.dp},tp={args.tp}", "--pp", str(pp),
               "--microbatches", str(m), "--schedule", schedule, "--train",
               "adamw", "--recompute", args.recompute, "--zero",
               str(args.zero)]
    if schedule == "interleaved":
        command += ["--virtual", "2"]
    if args.precision == "mixed":
        command += ["--precision", "mixed"]
    with tempfile.NamedTemporaryFile(suffix=".plan") as plan:
        out = subprocess.run(command + ["-o", plan.name], capture_output=True,
                             text=True, check=True).stdout
    return max(int(x) for x in re.findall(
        r"each at its own peak: .*activations (\d+)", out))


def planned(args, model, pp, m, schedule):
    out = subprocess.run(
        [args.tessera, "plan", model, "--machine", "dgx-h100", "--devices",
         str(args.dp * args.tp * pp), "--dp", str(args.dp), "--tp",
         str(args.tp), "--pp", str(pp), "--microbatches", str(m), "--zero",
         str(args.zero), "--recompute", args.recompute, "--sequence-parallel",
         "on" if args.sequence_parallel else "off", "--precision",
         "mixed" if args.precision == "mixed" else "fp32", "--schedule",
         schedule, "--json", "--top", "1"], capture_output=True, text=True,
        check=True).stdout
    return json.loads(out)["plans"][0]["activation_bytes"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessera", default="build/bin/tessera")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--recompute", default="none",
                        choices=["none", "selective", "full"])
    parser.add_argument("--dp", type=int, default=1)
    parser.add_argument("--zero", type=int, default=0, choices=range(4))
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--sequence-parallel", action="store_true",
                        help="Megatron-LM's SP (with --tp > 1)")
    parser.add_argument("--precision", default="fp32",
                        choices=["fp32", "mixed"],
                        help="mixed: a bf16 model, f32 master weights")
    args = parser.parse_args()
    print(f"{'schedule':>11} {'pp':>2} {'m':>2} {'compiled MB':>11} "
          f"{'planned MB':>10} {'error':>6}")
    with tempfile.NamedTemporaryFile(suffix=".mlir") as model:
        subprocess.run(
            [args.tessera, "model", "gpt", "--layers", str(args.layers),
             "--hidden", str(args.hidden), "--heads", "4", "--seq",
             str(args.seq), "--vocab", str(args.vocab), "--batch", "16",
             "--dtype", "bf16" if args.precision == "mixed" else "f32",
             "--sharding",
             "megatron-sp" if args.sequence_parallel else "megatron", "-o",
             model.name],
            check=True, capture_output=True)
        for schedule in ("1f1b", "gpipe", "interleaved", "zb-h1"):
            for pp in (2, 4):
                for m in (4, 8):
                    if schedule == "interleaved" and m % pp:
                        continue
                    c = compiled(args, model.name, pp, m, schedule)
                    p = planned(args, model.name, pp, m, schedule)
                    print(f"{schedule:>11} {pp:>2} {m:>2} {c / 1e6:>11.1f} "
                          f"{p / 1e6:>10.1f} {100 * (p - c) / c:>+5.1f}%")


if __name__ == "__main__":
    main()
