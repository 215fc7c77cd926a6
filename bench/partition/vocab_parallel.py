#!/usr/bin/env python3
"""Vocab-parallel embedding and cross-entropy against a whole table.

A GPT (2 layers, hidden 1024, seq 1024, batch 8) trained with AdamW on
tp=8, at vocab 32k and 128k, annotated by `tessera model --sharding
megatron` with the embedding table (and so the tied LM head) whole on every
device (`--vocab-parallel=false`: each computes the whole head), or split
on the vocabulary (the default). For each: the ring bytes each device
sends per step (counted as upstream_peer.py counts them), the all_gathers,
and the compiled plan's arena and peak memory per device.

Run from the repository root after building:
    python3 bench/partition/vocab_parallel.py
"""

import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from upstream_peer import measure  # noqa: E402

TESSERA = "build/bin/tessera"
MESH = "dp=1,tp=8"


def run(command):
    result = subprocess.run(command, capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{result.stderr}")
    return result.stdout


def main():
    print(f"{'vocab':>7} {'layout':10} {'ring MB/step':>12} "
          f"{'all_gathers':>11} {'arena MB':>9} {'activations MB':>14}")
    with tempfile.TemporaryDirectory() as scratch:
        for vocab in (32000, 128000):
            for layout, flags in (("whole", ["--vocab-parallel=false"]),
                                  ("vocab-par", [])):
                model = os.path.join(scratch, f"gpt{vocab}{layout}.mlir")
                run([TESSERA, "model", "gpt", "--layers", "2", "--hidden",
                     "1024", "--heads", "16", "--seq", "1024", "--vocab",
                     str(vocab), "--batch", "8", "--sharding", "megatron",
                     *flags, "-o", model])
                common = [model, "--mesh", MESH, "--train", "adamw"]
                partitioned = os.path.join(scratch, "part.mlir")
                run([TESSERA, "compile", *common, "--emit=partitioned",
                     "-o", partitioned])
                text = open(partitioned).read()
                kinds, _, ring = measure(text)
                plan = os.path.join(scratch, "model.plan")
                report = run([TESSERA, "compile", *common, "-o", plan])
                arena = int(re.search(r"arena of (\d+) bytes", report)[1])
                activations = int(re.search(
                    r"memory at the peak: .*activations (\d+)", report)[1])
                print(f"{vocab:>7} {layout:10} {ring / 1e6:>12.1f} "
                      f"{kinds.count('all_gather'):>11} {arena / 1e6:>9.1f} "
                      f"{activations / 1e6:>14.1f}")


main()
