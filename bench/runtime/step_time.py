#!/usr/bin/env python3
"""GPT train-step time on one rank, two builds of tessera-run side by side.

Three GPT sizes (the two of issue 27's table, where PyTorch 1.13 took 395 ms
and 1878 ms on one thread, and a smaller one), on 1 and 2 threads. Each
build compiles the model and runs its plan with its tessera-run,
interleaved and repeated; the table prints the minimum and median of each
build's `--time` (the fastest step after the first, or for a baseline
that predates it the mean), next to the same GPT in PyTorch (torch_gpt.py,
the fastest step of each run), and the ratios. Each
build gets `--threads N` where its tessera-run takes it (without it, a
build defaults to every core); a baseline that predates it only OpenBLAS's
N threads. On 2 threads PyTorch also runs with
OMP_WAIT_POLICY=passive ("torch passive"), since its OpenMP threads
otherwise spin on a busy machine.

Run from the repository root after building, with a baseline build (a copy
of bin/ from an earlier commit, holding tessera and tessera-run):
    python3 bench/runtime/step_time.py --baseline /tmp/old
"""

import argparse
import os
import re
import statistics
import subprocess
import tempfile

# layers, hidden, heads, seq, batch, vocab
SIZES = [(2, 128, 4, 64, 8, 512), (4, 256, 4, 128, 8, 1024),
         (6, 512, 8, 256, 4, 4096)]


def takes_threads(build):
    """Whether the build's tessera-run has --threads."""
    help_text = subprocess.run([os.path.join(build, "tessera-run"), "--help"],
                               capture_output=True, text=True)
    return "--threads" in help_text.stdout + help_text.stderr


def run_tessera(build, plan, steps, threads, ranks, threads_flag):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads))
    # One rank runs alone: under mpirun it would be bound to one core.
    command = ([os.path.join(build, "tessera-run"), plan] if ranks == 1 else
               [os.path.join(build, "tessera"), "run", plan, "--ranks",
                str(ranks)]) + ["--steps", str(steps), "--time"]
    if threads_flag:
        command += ["--threads", str(threads)]
    out = subprocess.run(command, check=True, capture_output=True, text=True,
                         env=env).stdout
    # The fastest step, as PyTorch's is taken; a baseline that predates it
    # reports only the mean.
    fastest = re.search(r"fastest ([\d.]+) ms", out)
    return float((fastest or re.search(r"time: ([\d.]+) ms", out)).group(1))


def run_torch(python, size, steps, threads, ranks, passive):
    layers, hidden, heads, seq, batch, vocab = size
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads))
    if passive:
        env["OMP_WAIT_POLICY"] = "passive"
    torch_gpt = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "torch_gpt.py")
    out = subprocess.run(
        [python, torch_gpt, "--layers", str(layers), "--hidden", str(hidden),
         "--heads", str(heads), "--seq", str(seq), "--batch", str(batch),
         "--vocab", str(vocab), "--threads", str(threads), "--steps",
         str(steps), "--ranks", str(ranks)], check=True, capture_output=True,
        text=True, env=env).stdout
    return float(re.search(r"torch: ([\d.]+) ms min", out).group(1))


def cell(times):
    if not times:
        return f"{'-':>9} {'-':>7}"
    return f"{min(times):9.1f} {statistics.median(times):7.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build/bin")
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--runs", nargs="+", default=["1x1", "1x2", "2x1"],
                        help="ranks x threads per rank of each row")
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="a Python with torch (Debian's python3-torch)")
    args = parser.parse_args()
    print(f"{'GPT (L, h, A, s, b, V)':28} {'rxt':>3} {'before min':>10} "
          f"{'median':>7} {'after min':>9} {'median':>7} {'torch min':>9} "
          f"{'median':>7} {'passive':>9} {'median':>7} {'after/before':>12} "
          f"{'after/torch':>11}")
    with tempfile.TemporaryDirectory() as work:
        for size in SIZES:
            layers, hidden, heads, seq, batch, vocab = size
            model = os.path.join(work, "gpt.mlir")
            subprocess.run(
                [os.path.join(args.build, "tessera"), "model", "gpt",
                 "--layers", str(layers), "--hidden", str(hidden), "--heads",
                 str(heads), "--seq", str(seq), "--batch", str(batch),
                 "--vocab", str(vocab), "--sharding", "megatron", "-o",
                 model], check=True, capture_output=True)
            for run in args.runs:
                ranks, threads = (int(n) for n in run.split("x"))
                # Each build compiles its own plan: the compiler's share
                # (folds, fusion) counts too.
                plans = {}
                for build in (args.baseline, args.build):
                    plans[build] = os.path.join(work, f"gpt{len(plans)}.plan")
                    subprocess.run(
                        [os.path.join(build, "tessera"), "compile", model,
                         "--mesh", f"dp={ranks},tp=1", "--train", "adamw",
                         "-o",
                         plans[build]], check=True, capture_output=True)
                times = {"before": [], "after": [], "torch": [],
                         "passive": []}
                for _ in range(args.repeats):
                    times["before"].append(run_tessera(
                        args.baseline, plans[args.baseline], args.steps,
                        threads, ranks, takes_threads(args.baseline)))
                    times["after"].append(run_tessera(
                        args.build, plans[args.build], args.steps, threads,
                        ranks, threads_flag=True))
                    times["torch"].append(run_torch(
                        args.python, size, args.steps, threads, ranks, False))
                    if threads > 1:
                        times["passive"].append(run_torch(
                            args.python, size, args.steps, threads, ranks,
                            True))
                torch = min(times["torch"] + times["passive"])
                print(f"{str(size):28} {run:>3} {cell(times['before'])} "
                      f"{cell(times['after'])} {cell(times['torch'])} "
                      f"{cell(times['passive'])} "
                      f"{min(times['after']) / min(times['before']):12.2f} "
                      f"{min(times['after']) / torch:11.2f}", flush=True)


if __name__ == "__main__":
    main()
