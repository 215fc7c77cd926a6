#!/usr/bin/env python3
"""Wall time of a full `tessera plan` search for GPT-3 175B and a 1T GPT.

The search enumerates DP x TP x PP x microbatches x ZeRO x schedule x
recomputation x sequence parallelism, partitions the program's first block
and first two blocks per DP x TP shape to price Megatron's layout (the
template: the second block's share counted per later block), and solves the
sharding ILP (batch on dp) and partitions its layout on the four shapes of
the fastest template plans. The goal: under 10 s for GPT-3 175B on 1024
GPUs and a 1T GPT on 3072 GPUs on a 2-core machine, and close to flat in the
device count. Prints each search's time, the plans it priced, the best plan
and the best plan of the ILP's layout.

Run from the repository root after building:
    python3 bench/search/plan_time.py
"""

import argparse
import subprocess
import tempfile
import time

MODELS = {
    # GPT-3 175B (Brown et al. 2020).
    "gpt3-175b": (["--layers", "96", "--hidden", "12288", "--heads", "96",
                   "--batch", "1536"], (64, 256, 1024, 4096, 8192)),
    # A 1T GPT (Narayanan et al. 2021, table 1: 128 layers, hidden 25600,
    # 160 heads, batch 3072 on 3072 GPUs).
    "gpt-1t": (["--layers", "128", "--hidden", "25600", "--heads", "160",
                "--batch", "3072"], (3072,)),
}


def plan(args, model, devices, extra=()):
    start = time.perf_counter()
    result = subprocess.run(
        [args.tessera, "plan", model, "--machine", args.machine,
         "--devices", str(devices), "--top", "1", *extra],
        capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    lines = result.stdout.splitlines()
    considered = lines[0].split(";")[1].split()[0]
    return seconds, considered, " ".join(lines[2].split()[1:12])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessera", default="build/bin/tessera")
    parser.add_argument("--machine", default="dgx-h100")
    parser.add_argument("--models", default="gpt3-175b,gpt-1t")
    args = parser.parse_args()
    print(f"{'model':<10} {'devices':>8} {'search s':>9} {'plans':>7}  "
          "best (dp tp pp mb zero schedule recompute sp layout step MFU)")
    for name in args.models.split(","):
        flags, device_counts = MODELS[name]
        with tempfile.NamedTemporaryFile(suffix=".mlir") as model:
            subprocess.run(
                [args.tessera, "model", "gpt", *flags, "--seq", "2048",
                 "--vocab", "51200", "--dtype", "bf16", "-o", model.name],
                check=True, capture_output=True)
            for devices in device_counts:
                seconds, considered, best = plan(args, model.name, devices)
                print(f"{name:<10} {devices:8} {seconds:9.2f} {considered:>7}"
                      f"  {best}")
                _, _, ilp = plan(args, model.name, devices,
                                 ["--layout", "ilp"])
                print(f"{'':<10} {'':8} {'':9} {'':>7}  best ilp: {ilp}")


if __name__ == "__main__":
    main()
