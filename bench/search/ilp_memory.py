#!/usr/bin/env python3
"""The ILP layout's memory as the plan search prices it and as compiled.

For each case, `tessera plan --layout ilp` ranks the plans of the ILP's
layout (the template's where the ILP finds it); `tessera compile --auto
--layout ilp` builds the best one, and its arena (the most a device holds)
is set beside the planned peak and the machine's device memory. A plan
priced to fit that compiles over the device memory would mislead.

  python3 bench/search/ilp_memory.py
"""
import re
import subprocess
import sys
import tempfile

CASES = [
    # name, generator, flags, machine, devices, extra compile flags
    ("gpt-5b", "gpt", ["--layers", "24", "--hidden", "4096", "--heads", "32",
                       "--seq", "1024", "--vocab", "51200", "--batch", "64",
                       "--attention", "unfused"],
     "dgx-a100-80gb", 8, ["--zero", "0"]),
    ("gpt-40b", "gpt", ["--layers", "48", "--hidden", "8192", "--heads", "64",
                        "--seq", "1024", "--vocab", "51200", "--batch", "64"],
     "dgx-a100-80gb", 16, ["--zero", "0"]),
    ("llama-7b", "llama", ["--layers", "32", "--hidden", "4096", "--heads",
                           "32", "--kv-heads", "8", "--seq", "2048",
                           "--vocab", "32000", "--batch", "32"],
     "dgx-h100", 8, []),
]


def run(args):
    done = subprocess.run(args, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def main():
    tessera = "build/bin/tessera"
    print(f"{'case':<10} {'plan':<40} {'planned GB':>10} {'arena GB':>9} "
          f"{'device GB':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, kind, flags, machine, devices, extra in CASES:
            model = f"{tmp}/{name}.mlir"
            rc, out = run([tessera, "model", kind, *flags, "--dtype", "bf16",
                           "-o", model])
            if rc:
                sys.exit(out)
            rc, out = run([tessera, "compile", model, "--auto", "--machine",
                           machine, "--devices", str(devices), "--train",
                           "adamw", "--precision", "mixed", "--layout", "ilp",
                           *extra, "-o", f"{tmp}/{name}.plan"])
            if rc:
                print(f"{name:<10} {out.strip().splitlines()[-1]}")
                continue
            auto = re.search(r"auto: (.*?): predicted", out).group(1)
            arena = int(re.search(r"arena of (\d+) bytes", out).group(1))
            choice = dict(re.findall(r"(\w+)=(\w+)", auto))
            pins = ["--dp", choice["dp"], "--tp", choice["tp"], "--zero",
                    choice["zero"].rstrip("k"), "--layout", "ilp",
                    "--microbatches", choice.get("microbatches", "1"),
                    "--recompute", choice.get("recompute", "none"),
                    "--sequence-parallel", "off", "--json", "--top", "1"]
            if "pp" in choice:
                pins += ["--pp", choice["pp"]]
            rc, planned = run([tessera, "plan", model, "--machine", machine,
                               "--devices", str(devices), *pins])
            peak = re.search(r'"peak_memory_bytes": ([0-9.e+]+)', planned)
            memory = re.search(r"over ([0-9.]+) GB", run(
                [tessera, "plan", model, "--machine", machine, "--devices",
                 str(devices), "--top", "1"])[1])
            print(f"{name:<10} {auto:<40} "
                  f"{float(peak.group(1)) / 1e9 if peak else float('nan'):>10.1f} "
                  f"{arena / 1e9:>9.1f} {memory.group(1) if memory else '?':>9}")


if __name__ == "__main__":
    main()
