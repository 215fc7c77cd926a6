#!/usr/bin/env python3
"""What training on a token file costs against the same steps on seeded
synthetic batches, next to PyTorch's way of feeding them.

Packs a text of a few MB (`tessera data pack`), compiles GPT AdamW steps
for one, two and four CPU ranks (four oversubscribe this machine's
cores), and times `tessera-run --time` with the synthetic batch every
step and with `--data` (each rank reading its pieces of the next batch
from the mapped file, a step ahead on a thread), several runs each,
alternating, and reports the median step times and their difference. The peer is how nanoGPT feeds PyTorch: a random batch of
samples cut from the mapped uint16 file each step (torch.from_file and
indexing, in /usr/bin/python3), timed alone: the time it adds to a step
where nothing reads it ahead.

Run from the repository root after building:
    python3 bench/training/data_feed.py
"""

import argparse
import os
import random
import statistics
import subprocess
import tempfile

GPT = ["--layers", "4", "--hidden", "256", "--heads", "8", "--seq", "256",
       "--vocab", "256", "--batch", "16"]


def time_run(args, ranks, plan, extra):
    command = ["mpirun", "--oversubscribe", "-np", str(ranks), args.runner,
               plan, "--steps", str(args.steps), "--time"] + extra
    output = subprocess.run(command, check=True, capture_output=True,
                            text=True, env=dict(os.environ,
                                                OMPI_ALLOW_RUN_AS_ROOT="1",
                                                OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
                            ).stdout
    line = next(l for l in output.splitlines() if l.startswith("time:"))
    return float(line.split()[1])


# PyTorch 1.13 has no uint16: the byte-level ids (below 256) read the same
# as int16; the 24-byte header is read as ids too (a timing peer only).
TORCH_FEED = r"""
import sys, time, torch
path, batch, seq, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data = torch.from_file(path, shared=False, size=(len(open(path, 'rb').read()) - 24) // 2, dtype=torch.int16)
torch.manual_seed(0)
times = []
for _ in range(steps):
    begin = time.perf_counter()
    starts = torch.randint(len(data) - seq - 1, (batch,))
    x = torch.stack([data[s:s + seq].to(torch.int64) for s in starts])
    y = torch.stack([data[s + 1:s + 1 + seq].to(torch.int64) for s in starts])
    times.append(time.perf_counter() - begin)
times.sort()
print(1e3 * times[len(times) // 2])
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    tessera = os.path.join(args.bin, "tessera")
    args.runner = os.path.join(args.bin, "tessera-run")
    with tempfile.TemporaryDirectory() as work:
        random.seed(0)
        words = ("the of and to in is was for on that with as by at from "
                 "training model device shard pipeline tensor").split()
        text = os.path.join(work, "text.txt")
        with open(text, "w") as out:
            out.write(" ".join(random.choice(words) for _ in range(800000)))
        tokens = os.path.join(work, "text.tokens")
        subprocess.run([tessera, "data", "pack", text, "-o", tokens],
                       check=True, capture_output=True)
        model = os.path.join(work, "gpt.mlir")
        subprocess.run([tessera, "model", "gpt", *GPT, "--sharding",
                        "megatron", "-o", model], check=True,
                       capture_output=True)
        print(f"GPT {' '.join(GPT)}; {args.steps} steps, median of "
              f"{args.repeats} runs")
        print(f"{'plan':<12} {'synthetic ms':>13} {'--data ms':>10} "
              f"{'difference':>11}")
        for name, ranks, mesh in [("1 device", 1, "dp=1,tp=1"),
                                  ("dp=2", 2, "dp=2,tp=1"),
                                  ("dp=4", 4, "dp=4,tp=1"),
                                  ("dp=2 x tp=2", 4, "dp=2,tp=2")]:
            plan = os.path.join(work, f"{ranks}.plan")
            subprocess.run([tessera, "compile", model, "--mesh", mesh,
                            "--train", "adamw", "-o", plan], check=True,
                           capture_output=True)
            synthetic, fed = [], []
            for _ in range(args.repeats):
                synthetic.append(time_run(args, ranks, plan, []))
                fed.append(time_run(args, ranks, plan, ["--data", tokens]))
            a, b = statistics.median(synthetic), statistics.median(fed)
            print(f"{name:<12} {a:>13.2f} {b:>10.2f} "
                  f"{100 * (b - a) / a:>+10.1f}%")
        torch = subprocess.run(
            ["/usr/bin/python3", "-c", TORCH_FEED, tokens, "16", "256", "50"],
            capture_output=True, text=True)
        if torch.returncode == 0:
            print(f"PyTorch (nanoGPT's get_batch, not read ahead): "
                  f"{float(torch.stdout):.3f} ms per batch")
        else:
            print("PyTorch not available: " + torch.stderr.strip()[-200:])


if __name__ == "__main__":
    main()
