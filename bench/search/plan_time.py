#!/usr/bin/env python3
"""Wall time of a full `tessera plan` search for GPT-3 175B as devices grow.

The search enumerates DP x TP x PP x microbatches x ZeRO x schedule x
recomputation x sequence parallelism and partitions the program once per
DP x TP shape to price its collectives. The goal: under 10 s for 1024 GPUs on
a 2-core machine, and close to flat in the device count.

Run from the repository root after building:
    python3 bench/search/plan_time.py
"""

import argparse
import subprocess
import tempfile
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessera", default="build/bin/tessera")
    parser.add_argument("--machine", default="dgx-h100")
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile(suffix=".mlir") as model:
        subprocess.run(
            [args.tessera, "model", "gpt", "--layers", "96", "--hidden",
             "12288", "--heads", "96", "--seq", "2048", "--vocab", "51200",
             "--batch", "1536", "--dtype", "bf16", "-o", model.name],
            check=True, capture_output=True)
        print(f"{'devices':>8} {'search s':>9} {'plans':>7}  best")
        for devices in (64, 256, 1024, 4096, 8192):
            start = time.perf_counter()
            result = subprocess.run(
                [args.tessera, "plan", model.name, "--machine", args.machine,
                 "--devices", str(devices), "--top", "1"],
                capture_output=True, text=True, check=True)
            seconds = time.perf_counter() - start
            lines = result.stdout.splitlines()
            considered = lines[0].split(";")[1].split()[0]
            best = " ".join(lines[2].split()[1:9])
            print(f"{devices:8} {seconds:9.2f} {considered:>7}  {best}")


if __name__ == "__main__":
    main()
