#!/usr/bin/env python3
"""Checkpoint save and load throughput against dd of the same bytes.

Compiles GPT AdamW steps (about 100M parameters: 1.3 GB of parameters and
optimizer state in f32) for one device, for dp=2 and for dp=2 with ZeRO-1,
runs a step, and times `tessera-run --time --save-checkpoint` (every rank
writes its pieces, fsyncs them, and rank 0 swaps the directory in) and
`--load-checkpoint` (on the same plan, and on the one-device plan from
the dp=2 checkpoint, resharded). Throughput is the checkpoint directory's
bytes over the time rank 0 reports.

The peers, on the same bytes in the same directory:
  - dd writing them with conv=fsync (one stream, 4 MiB blocks), and
    reading them back;
  - PyTorch's torch.save of tensors of the same sizes followed by fsync,
    and torch.load (in /usr/bin/python3, where PyTorch is).
Reads find the files in the page cache for every row alike: the loads
come right after the saves, and the machine cannot drop its caches.

Run from the repository root after building:
    python3 bench/training/checkpoint_io.py
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

GPT = ["--layers", "8", "--hidden", "1024", "--heads", "16", "--seq", "64",
       "--vocab", "8192", "--batch", "2"]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(args, ranks, plan, extra):
    command = [args.runner, plan, "--steps", "1", "--time"] + extra
    if ranks > 1:
        command = ["mpirun", "--oversubscribe", "-np", str(ranks)] + command
    output = subprocess.run(command, check=True, capture_output=True,
                            text=True, env=ENV).stdout
    return {kind: float(seconds) for kind, seconds in re.findall(
        r"checkpoint: (saved|loaded) in ([0-9.]+) s", output)}


def directory_bytes(path):
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def dd(work, size):
    path = os.path.join(work, "dd.bin")
    blocks = (size + (4 << 20) - 1) // (4 << 20)
    begin = time.perf_counter()
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=4M",
                    f"count={blocks}", "conv=fsync"], check=True,
                   capture_output=True)
    write = time.perf_counter() - begin
    begin = time.perf_counter()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=4M"], check=True,
                   capture_output=True)
    read = time.perf_counter() - begin
    os.remove(path)
    return write, read


TORCH_IO = r"""
import os, sys, time, torch
path, tensors = sys.argv[1], [int(n) for n in sys.argv[2:]]
state = {f"t{i}": torch.rand(n) for i, n in enumerate(tensors)}
begin = time.perf_counter()
with open(path, "wb") as f:
    torch.save(state, f)
    f.flush()
    os.fsync(f.fileno())
write = time.perf_counter() - begin
begin = time.perf_counter()
torch.load(path)
read = time.perf_counter() - begin
os.remove(path)
print(write, read)
"""


def torch_io(work, checkpoint):
    """torch.save and torch.load of rank 0's tensors, by their sizes (two-byte
    ones as f32 of half the count)."""
    sizes = []
    with open(os.path.join(checkpoint, "rank-0.txt")) as index:
        for line in list(index)[2:]:
            # "<name> <dtype> <dims...> @ <layout>"
            fields = line.split("@")[0].split()
            n = 1
            for d in fields[2:]:
                n *= int(d)
            sizes.append(n // 2 if fields[1] in ("bf16", "f16") else n)
    result = subprocess.run(["/usr/bin/python3", "-c", TORCH_IO,
                             os.path.join(work, "torch.pt")] +
                            [str(n) for n in sizes],
                            capture_output=True, text=True)
    if result.returncode != 0:
        return None
    return [float(x) for x in result.stdout.split()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", default=None,
                        help="where to write (default: a temporary "
                             "directory under /tmp)")
    args = parser.parse_args()
    tessera = os.path.join(args.bin, "tessera")
    args.runner = os.path.join(args.bin, "tessera-run")
    with tempfile.TemporaryDirectory(dir=args.dir) as work:
        model = os.path.join(work, "gpt.mlir")
        subprocess.run([tessera, "model", "gpt", *GPT, "--sharding", "megatron",
                        "-o", model],
                       check=True, capture_output=True)
        plans = {}
        for name, mesh, extra in [("1 device", "dp=1,tp=1", []),
                                  ("dp=2", "dp=2,tp=1", []),
                                  ("dp=2 ZeRO-1", "dp=2,tp=1", ["--zero", "1"])]:
            plans[name] = os.path.join(work, name.replace(" ", "_") + ".plan")
            subprocess.run([tessera, "compile", model, "--mesh", mesh,
                            "--train", "adamw", *extra, "-o", plans[name]],
                           check=True, capture_output=True)
        print(f"GPT {' '.join(GPT)}, AdamW in f32; median of {args.repeats} "
              f"runs; GB/s = 1e9 bytes/s")
        print(f"{'checkpoint':<34} {'MB':>7} {'save GB/s':>10} "
              f"{'load GB/s':>10}")
        rows = [("1 device", 1, "1 device"), ("dp=2", 2, "dp=2"),
                ("dp=2 ZeRO-1", 2, "dp=2 ZeRO-1"),
                ("dp=2, loaded on 1 device", 2, "1 device")]
        total = 0
        checkpoint = None
        for name, ranks, load_on in rows:
            saves, loads = [], []
            for _ in range(args.repeats):
                checkpoint = os.path.join(work, "ck")
                shutil.rmtree(checkpoint, ignore_errors=True)
                source = plans[name.split(",")[0]]
                saves.append(run(args, ranks, source,
                                 ["--save-checkpoint", checkpoint])["saved"])
                loads.append(run(args, 1 if load_on == "1 device" else ranks,
                                 plans[load_on],
                                 ["--load-checkpoint", checkpoint])["loaded"])
            size = directory_bytes(checkpoint)
            total = max(total, size)
            print(f"{name:<34} {size / 1e6:>7.0f} "
                  f"{size / statistics.median(saves) / 1e9:>10.2f} "
                  f"{size / statistics.median(loads) / 1e9:>10.2f}")
        # The peers, on the one-device checkpoint's bytes.
        shutil.rmtree(checkpoint, ignore_errors=True)
        run(args, 1, plans["1 device"], ["--save-checkpoint", checkpoint])
        size = directory_bytes(checkpoint)
        writes, reads = zip(*[dd(work, size) for _ in range(args.repeats)])
        print(f"{'dd (conv=fsync), same bytes':<34} {size / 1e6:>7.0f} "
              f"{size / statistics.median(writes) / 1e9:>10.2f} "
              f"{size / statistics.median(reads) / 1e9:>10.2f}")
        timed = [torch_io(work, checkpoint) for _ in range(args.repeats)]
        if all(timed):
            writes, reads = zip(*timed)
            print(f"{'torch.save + fsync / torch.load':<34} "
                  f"{size / 1e6:>7.0f} "
                  f"{size / statistics.median(writes) / 1e9:>10.2f} "
                  f"{size / statistics.median(reads) / 1e9:>10.2f}")
        else:
            print("PyTorch not available")


if __name__ == "__main__":
    main()
