#!/usr/bin/env python3
"""The auto-shard ILP against what the compiler builds from its choice.

For GPT models on a few meshes: --tessera-auto-shard prices a train step's
collectives (forward and backward, the bytes each moves per device as the
partitioner's reshard model counts them); the same annotations are then
built into a train step, propagated and partitioned, and the collectives of
the per-device program are summed the same way (an all-reduce's or
all-to-all's buffer, an all-gather's output, a reduce-scatter's input).
The optimizer's gradient reductions are the train step's; the ILP prices
them as the parameters' gradients' reshards. Also the ILP's size and time.

  python3 bench/search/auto_shard.py [--layers 2] [--hidden 64] ...
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

BIN = os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin")
COLLECTIVE = re.compile(
    r"dist\.(all_reduce|all_gather|reduce_scatter|all_to_all)\b.*?:\s*"
    r"(tensor<[^>]*>)(?:\s*->\s*(tensor<[^>]*>))?\s*$")
BYTES = {"f32": 4, "bf16": 2, "f16": 2, "f64": 8, "i32": 4, "i64": 8}


def tensor_bytes(text):
    dims = text[len("tensor<"):-1].split("x")
    count = 1
    for dim in dims[:-1]:
        count *= int(dim)
    return count * BYTES[dims[-1]]


def compiled_bytes(program):
    total, count = 0, 0
    for line in program.splitlines():
        match = COLLECTIVE.search(line)
        if not match:
            continue
        kind, operand, result = match.groups()
        # The full buffer: an all-gather's output, else its input.
        total += tensor_bytes(result if kind == "all_gather" and result else operand)
        count += 1
    return total, count


def run(args, stdin=None):
    done = subprocess.run(args, input=stdin, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(args)} failed:\n{done.stderr}")
    return done


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--machine", default="dgx-h100")
    parser.add_argument("--meshes", default="tp=4;dp=2,tp=2;dp=4")
    parser.add_argument("--memory-limit", default="0")
    args = parser.parse_args()
    opt = os.path.join(BIN, "tessera-opt")
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "gpt.mlir")
        run([os.path.join(BIN, "tessera"), "model", "gpt", "--layers",
             str(args.layers), "--hidden", str(args.hidden), "--heads",
             str(args.heads), "--seq", str(args.seq), "--vocab",
             str(args.vocab), "--batch", str(args.batch), "-o", model])
        text = open(model).read()
        print(f"{'mesh':<12} {'ILP MB':>10} {'compiled MB':>12} {'ratio':>7} "
              f"{'collectives':>11} {'variables':>9} {'solve s':>8}")
        for mesh in args.meshes.split(";"):
            axes = ", ".join(f'"{a.split("=")[0]}"={a.split("=")[1]}'
                             for a in mesh.split(","))
            meshed = text.replace("module {", f"module {{\n  dist.mesh @mesh [{axes}]", 1)
            shard = run([opt, "-", "--mlir-print-op-on-diagnostic=false",
                         "--tessera-auto-shard=explain=true machine="
                         f"{args.machine} memory-limit={args.memory_limit}"],
                        meshed)
            summary = re.search(
                r"auto-shard over .*?: ([0-9.]+) us per step, ([0-9.]+) MB of "
                r"collectives.*?; (\d+) variables.*solved in ([0-9.]+) s",
                shard.stderr)
            built = run([opt, "-", "--tessera-train-step=optimizer=adamw",
                         "--tessera-propagate", "--tessera-partition"],
                        shard.stdout)
            compiled, count = compiled_bytes(built.stdout)
            ilp = float(summary.group(2)) * 1e6
            print(f"{mesh:<12} {ilp / 1e6:>10.3f} {compiled / 1e6:>12.3f} "
                  f"{compiled / ilp if ilp else float('nan'):>7.3f} {count:>11} "
                  f"{summary.group(3):>9} {summary.group(4):>8}")


if __name__ == "__main__":
    main()
