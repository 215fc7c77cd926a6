#!/usr/bin/env python3
"""Compile time, compile memory and plan size against the microbatch count.

Compiles the AdamW train step of GPT-3 175B (96 layers, h 12288, 96 heads,
s 2048) at t8 p8 d8 and of Megatron-LM's 1T GPT (128 layers, h 25600, 160
heads, s 2048) at t8 p64 d6 (Narayanan et al. 2021, table 1) with 1F1B
over 8 to 512 microbatches, at a fixed global batch (microbatch size 1 at
512), and reports each `tessera compile`'s wall time, peak resident memory
and plan size. A pipeline stage holds its units once and a schedule entry
per unit run, so all three should stay flat but for the table.

The issue's figures for the unrolled pipeline of before (one copy of each
unit per microbatch) are printed alongside: the 1T configuration failed
at 512 microbatches on the MPI tag limit, and took 160 s, 6.2 GB and a
325 MB plan at 256. Run from the repository root after building:
    python3 bench/pipeline/compile_time.py [--microbatches 8 64 512]
"""

import argparse
import os
import subprocess
import tempfile
import time

MODELS = [
    # name, model flags, mesh, pp, data-parallel size
    ("GPT-3 175B", ["--layers", "96", "--hidden", "12288", "--heads", "96",
                    "--seq", "2048", "--vocab", "51200"], "pp=8,dp=8,tp=8",
     8, 8),
    ("1T", ["--layers", "128", "--hidden", "25600", "--heads", "160",
            "--seq", "2048", "--vocab", "51200"], "pp=64,dp=6,tp=8", 64, 6),
]

# The unrolled pipeline's figures (issue 26): microbatches -> text.
BEFORE = {("1T", 256): "160 s, 6.2 GB, 325 MB plan",
          ("1T", 512): "failed: 64577 tags > 32767"}


def run_measured(command):
    """Runs `command`; returns (seconds, peak RSS in bytes)."""
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.monotonic() - start
    stderr = process.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{stderr}")
    return seconds, usage.ru_maxrss * 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessera", default="build/bin/tessera")
    parser.add_argument("--microbatches", type=int, nargs="+",
                        default=[8, 32, 128, 512])
    args = parser.parse_args()
    most = max(args.microbatches)
    print("model        microbatches   compile s   peak GB   plan MB   "
          "unrolled before")
    with tempfile.TemporaryDirectory() as directory:
        for name, flags, mesh, pp, dp in MODELS:
            model = os.path.join(directory, "model.mlir")
            subprocess.run([args.tessera, "model", "gpt", *flags, "--batch",
                            str(dp * most), "--sharding", "megatron", "-o",
                            model], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            for m in args.microbatches:
                plan = os.path.join(directory, "step.plan")
                seconds, peak = run_measured(
                    [args.tessera, "compile", model, "--mesh", mesh, "--pp",
                     str(pp), "--microbatches", str(m), "--train", "adamw",
                     "-o", plan])
                size = os.path.getsize(plan)
                print(f"{name:12} {m:12} {seconds:11.1f} {peak / 1e9:9.2f} "
                      f"{size / 1e6:9.1f}   {BEFORE.get((name, m), '')}")


if __name__ == "__main__":
    main()
