#!/usr/bin/env python3
"""The activation memory `tessera plan` charges a pipelined plan against the
compiled stages' activation peaks (the largest stage), side by side, for each
schedule, stage count and microbatch count.

Run from the repository root after building:
    python3 bench/pipeline/activations.py
"""

import argparse
import json
import re
import subprocess
import tempfile


def compiled(tessera, model, pp, m, schedule, virtual, recompute, tp):
    args = [tessera, "compile", model, "--mesh", f"dp=1,tp={tp}", "--pp", str(pp),
            "--microbatches", str(m), "--schedule", schedule, "--train",
            "adamw", "--recompute", recompute]
    if schedule == "interleaved":
        args += ["--virtual", str(virtual)]
    with tempfile.NamedTemporaryFile(suffix=".plan") as plan:
        out = subprocess.run(args + ["-o", plan.name], capture_output=True,
                             text=True, check=True).stdout
    return max(int(x) for x in re.findall(
        r"each at its own peak: .*activations (\d+)", out))


def planned(tessera, model, pp, m, schedule, recompute, tp, sp):
    out = subprocess.run(
        [tessera, "plan", model, "--machine", "dgx-h100", "--devices",
         str(pp * tp), "--dp", "1", "--tp", str(tp), "--pp", str(pp),
         "--microbatches", str(m), "--zero", "0", "--recompute", recompute,
         "--sequence-parallel", "on" if sp else "off", "--precision", "fp32",
         "--schedule",
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
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--sequence-parallel", action="store_true",
                        help="Megatron-LM's SP (with --tp > 1)")
    args = parser.parse_args()
    print(f"{'schedule':>11} {'pp':>2} {'m':>2} {'compiled MB':>11} "
          f"{'planned MB':>10} {'error':>6}")
    with tempfile.NamedTemporaryFile(suffix=".mlir") as model:
        subprocess.run(
            [args.tessera, "model", "gpt", "--layers", str(args.layers),
             "--hidden", str(args.hidden), "--heads", "4", "--seq",
             str(args.seq), "--vocab", str(args.vocab), "--batch", "16",
             "--sharding",
             "megatron-sp" if args.sequence_parallel else "megatron", "-o",
             model.name],
            check=True, capture_output=True)
        for schedule in ("1f1b", "gpipe", "interleaved", "zb-h1"):
            for pp in (2, 4):
                for m in (4, 8):
                    if schedule == "interleaved" and m % pp:
                        continue
                    c = compiled(args.tessera, model.name, pp, m, schedule, 2,
                                 args.recompute, args.tp)
                    p = planned(args.tessera, model.name, pp, m, schedule,
                                args.recompute, args.tp,
                                args.sequence_parallel)
                    print(f"{schedule:>11} {pp:>2} {m:>2} {c / 1e6:>11.1f} "
                          f"{p / 1e6:>10.1f} {100 * (p - c) / c:>+5.1f}%")


if __name__ == "__main__":
    main()
