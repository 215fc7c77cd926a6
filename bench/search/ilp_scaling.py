#!/usr/bin/env python3
"""The auto-shard ILP's size and solve time against the layer count.

GPT-3 175B's layer shape (hidden 12288, 96 heads, sequence 2048, vocabulary
51200; a microbatch of 1) at 2 to 96 layers, on a tp mesh and a dp x tp mesh
of an H100 cluster: the repeated blocks share their variables, so the
program should stay the size of one block. On a dp x tp mesh "dp" splits
the batch only (batch-axes=dp, as the plan search solves it). Also a
1T-parameter GPT's layer (hidden 25600, 160 heads, 128 layers). Prints the
ILP's variables, constraints and the pass's wall time per run.

  python3 bench/search/ilp_scaling.py [--layers 2,8,32,96] [--meshes ...]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

BIN = os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin")
MODELS = {
    "gpt3-175b": dict(hidden=12288, heads=96, seq=2048, vocab=51200),
    "gpt-1t": dict(hidden=25600, heads=160, seq=2048, vocab=51200),
}


def run(args, stdin=None):
    done = subprocess.run(args, input=stdin, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(args)} failed:\n{done.stderr}")
    return done


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", default="2,8,32,96")
    parser.add_argument("--meshes", default='"tp"=8;"dp"=2, "tp"=8')
    parser.add_argument("--models", default="gpt3-175b,gpt-1t")
    parser.add_argument("--machine", default="dgx-h100")
    args = parser.parse_args()
    print(f"{'model':<10} {'mesh':<18} {'layers':>6} {'nodes':>7} "
          f"{'distinct':>8} {'variables':>9} {'constraints':>11} "
          f"{'solve s':>8} {'pass s':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            shape = MODELS[name]
            for layers in [int(n) for n in args.layers.split(",")]:
                model = os.path.join(tmp, f"{name}-{layers}.mlir")
                run([os.path.join(BIN, "tessera"), "model", "gpt", "--layers",
                     str(layers), "--hidden", str(shape["hidden"]), "--heads",
                     str(shape["heads"]), "--seq", str(shape["seq"]),
                     "--vocab", str(shape["vocab"]), "--batch", "1",
                     "--dtype", "bf16", "-o", model])
                text = open(model).read()
                for mesh in args.meshes.split(";"):
                    meshed = text.replace(
                        "module {", f"module {{\n  dist.mesh @mesh [{mesh}]", 1)
                    started = time.time()
                    batch = " batch-axes=dp" if '"dp"' in mesh else ""
                    done = run([os.path.join(BIN, "tessera-opt"), "-",
                                "--tessera-auto-shard=explain=true machine="
                                f"{args.machine} memory-limit=1e15{batch}",
                                "--mlir-print-op-on-diagnostic=false",
                                "-o", os.devnull], meshed)
                    wall = time.time() - started
                    summary = re.search(
                        r"(\d+) variables, (\d+) constraints for (\d+) nodes "
                        r"\((\d+) distinct.*solved in ([0-9.]+) s",
                        done.stderr)
                    variables, constraints, nodes, distinct, solve = \
                        summary.groups()
                    print(f"{name:<10} {mesh.replace(chr(34), ''):<18} "
                          f"{layers:>6} {nodes:>7} {distinct:>8} "
                          f"{variables:>9} {constraints:>11} {solve:>8} "
                          f"{wall:>7.2f}")


if __name__ == "__main__":
    main()
