#!/usr/bin/env python3
"""Causal ring attention's load balance: each rank's time in its attention
blocks with the sequence stored in zigzag order (the default,
--tessera-zigzag-context) against natural order (--zigzag=false).

In natural order, rank r of a cp ring holds queries r of the sequence's cp
pieces: its blocks against later ranks' keys are empty, so rank 0 computes
one half block per step and rank cp - 1 one whole block per step but its
own; every ring step waits for the slowest. In zigzag order rank r holds
chunks r and 2 cp - 1 - r of 2 cp, and every block costs every rank half
a block (Megatron-LM's context-parallel load balance).

Compiles a GPT's AdamW train step with ring attention on cp ranks, runs a
few steps traced, and reports from the last step's trace each rank's
milliseconds in nn.attention_block and nn.attention_block_grad, their
spread (slowest over fastest), and the fastest step of each order. Then
checks that both orders train exactly as one device does (tessera verify).

Run from the repository root after building:
    python3 bench/partition/ring_balance.py [--cp 2] [--seq 4096]
"""

import argparse
import json
import os
import re
import subprocess
import tempfile

LAYERS, HIDDEN, HEADS, BATCH = 2, 256, 4, 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--cp", type=int, default=2)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    tessera = os.path.join(args.bin, "tessera")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt.mlir")
        subprocess.run([tessera, "model", "gpt", "--layers", str(LAYERS),
                        "--hidden", str(HIDDEN), "--heads", str(HEADS),
                        "--seq", str(args.seq), "--vocab", "256", "--batch",
                        str(BATCH), "--sharding", "megatron",
                        "--context-parallel", "ring", "-o", model],
                       check=True, capture_output=True)
        print(f"GPT {LAYERS} layers, hidden {HIDDEN}, {HEADS} heads, "
              f"sequence {args.seq}, batch {BATCH}, f32, AdamW, ring "
              f"attention on cp={args.cp} CPU ranks; the last of "
              f"{args.steps} steps")
        print(f"{'order':<8} " + " ".join(
            f"{'rank ' + str(r) + ' ms':>10}" for r in range(args.cp)) +
              f" {'slowest/fastest':>16} {'step ms':>8} {'verify':>7}")
        mesh = f"dp=1,cp={args.cp},tp=1"
        for order, flag in (("natural", "--zigzag=false"),
                            ("zigzag", "--zigzag=true")):
            plan = os.path.join(work, f"{order}.plan")
            subprocess.run([tessera, "compile", model, "--mesh", mesh,
                            "--train", "adamw", flag, "-o", plan],
                           check=True, capture_output=True)
            trace = os.path.join(work, f"{order}-trace")
            os.makedirs(trace, exist_ok=True)
            output = subprocess.run(
                [tessera, "run", plan, "--ranks", str(args.cp), "--steps",
                 str(args.steps), "--time", "--trace", trace],
                check=True, capture_output=True, text=True, env=env).stdout
            fastest = float(re.search(r"fastest ([0-9.]+) ms", output)[1])
            blocks = get_block_ms(os.path.join(trace, "trace.json"), args.cp)
            verify = subprocess.run(
                [tessera, "verify", model, "--mesh", mesh, "--train",
                 "adamw", "--steps", "2", flag, "--tolerance", "1e-4"],
                capture_output=True, text=True).stdout
            passed = "PASS" if "verify: PASS" in verify else "FAIL"
            print(f"{order:<8} " +
                  " ".join(f"{ms:>10.1f}" for ms in blocks) +
                  f" {max(blocks) / min(blocks):>16.2f} {fastest:>8.1f}"
                  f" {passed:>7}")


def get_block_ms(path, ranks):
    """Each rank's milliseconds in attention blocks (forward and backward)
    in the trace's last step."""
    with open(path) as file:
        events = [e for e in json.load(file)["traceEvents"]
                  if e.get("ph") == "X" and "step" in e.get("args", {})]
    last = max(e["args"]["step"] for e in events)
    totals = [0.0] * ranks
    for e in events:
        if (e["args"]["step"] == last and
                e["name"].startswith("nn.attention_block")):
            totals[e["pid"]] += e["dur"] / 1e3
    return totals


if __name__ == "__main__":
    main()
