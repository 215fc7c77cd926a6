#!/usr/bin/env python3
"""Step time with the overlap schedule against the same plan without it.

Compiles a GPT train step (AdamW) for 2 or 4 CPU ranks under each
configuration twice, blocking (--overlap --prefetch 0: the same buckets) and
with --overlap (collectives started early on the communication stream,
waited for before their first read), runs both with
`tessera-run --time` several times, alternating, and reports the median
step times. One traced run of each scheduled plan gives the overlap: how
much of the time collectives are in flight on the communication thread
also has kernels running on the compute thread, and how long the compute
thread waits for collectives (blocking collectives, or waits).

Run from the repository root after building:
    python3 bench/runtime/overlap.py
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile

# Name, ranks, compile flags. Two ranks fit this project's 2-core machines
# without oversubscription; four share the cores.
CONFIGS = [
    ("dp=2 ZeRO-3", 2, ["--mesh", "dp=2,tp=1", "--zero", "3"]),
    ("dp=2 ZeRO-0, buckets", 2, ["--mesh", "dp=2,tp=1", "--zero", "0",
                                 "--bucket-bytes", "262144"]),
    ("dp=4 ZeRO-3", 4, ["--mesh", "dp=4,tp=1", "--zero", "3"]),
    ("dp=4 ZeRO-2", 4, ["--mesh", "dp=4,tp=1", "--zero", "2"]),
    ("dp=4 ZeRO-0, buckets", 4, ["--mesh", "dp=4,tp=1", "--zero", "0",
                                 "--bucket-bytes", "262144"]),
    ("dp=2 tp=2 ZeRO-3", 4, ["--mesh", "dp=2,tp=2", "--zero", "3"]),
]


def run(args, ranks, plan, steps, trace=None):
    command = ["mpirun", "--oversubscribe", "-np", str(ranks), args.runner, plan,
               "--steps", str(steps), "--time"]
    if trace:
        command += ["--trace", trace]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    for line in out.stdout.splitlines():
        if line.startswith("time:"):
            return float(line.split()[1])
    raise RuntimeError(out.stdout + out.stderr)


def merge(spans):
    """The union of [start, end) spans, sorted and disjoint."""
    merged = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def intersection(a, b):
    total = 0.0
    for start, end in a:
        for other_start, other_end in b:
            total += max(0.0, min(end, other_end) - max(start, other_start))
    return total


def overlap(trace_dir, rank=0):
    events = json.load(open(f"{trace_dir}/rank{rank}.json"))["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    kernels = merge((e["ts"], e["ts"] + e["dur"]) for e in spans
                    if e["tid"] == 0 and e["name"].startswith("nn."))
    comm = merge((e["ts"], e["ts"] + e["dur"]) for e in spans
                 if e["tid"] != 0)
    waiting = sum(e["dur"] for e in spans if e["tid"] == 0 and
                  (e["name"] == "wait" or e["name"].startswith("dist.")))
    in_flight = sum(end - start for start, end in comm)
    return in_flight, intersection(comm, kernels), waiting


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessera", default="build/bin/tessera")
    parser.add_argument("--runner", default="build/bin/tessera-run")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default="",
                        help="run the configurations whose name starts so")
    parser.add_argument("--model", default="--layers 4 --hidden 256 --heads 8 "
                        "--seq 32 --batch 8 --vocab 1024")
    args = parser.parse_args()
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as work:
        model = f"{work}/gpt.mlir"
        subprocess.run([args.tessera, "model", "gpt", "--sharding", "megatron",
                        *args.model.split(), "-o", model], check=True,
                       capture_output=True)
        print(f"{'plan':<22} {'blocking ms':>12} {'overlap ms':>11} "
              f"{'speedup':>8}  {'in flight ms':>12} {'under kernels':>13} "
              f"{'waits ms':>9} (blocking: {'ms':>6})")
        for name, ranks, flags in CONFIGS:
            if not name.startswith(args.only):
                continue
            plans = {}
            # Both through --tessera-schedule, so both get its buckets; the
            # blocking plan starts nothing early (prefetch 0).
            for kind, extra in (("blocking", ["--overlap", "--prefetch", "0"]),
                                ("overlap", ["--overlap"])):
                plans[kind] = f"{work}/{kind}.plan"
                subprocess.run(
                    [args.tessera, "compile", model, "--train", "adamw",
                     *flags, *extra, "-o", plans[kind]],
                    check=True, capture_output=True)
            times = {"blocking": [], "overlap": []}
            for _ in range(args.repeats):
                for kind in times:
                    times[kind].append(run(args, ranks, plans[kind], args.steps))
            blocking = statistics.median(times["blocking"])
            scheduled = statistics.median(times["overlap"])
            traces = {}
            for kind in times:
                traces[kind] = f"{work}/{kind}.trace"
                os.makedirs(traces[kind], exist_ok=True)
                run(args, ranks, plans[kind], 3, traces[kind])
            in_flight, covered, waits = overlap(traces["overlap"])
            _, _, blocked = overlap(traces["blocking"])
            steps = 3
            print(f"{name:<22} {blocking:>12.2f} {scheduled:>11.2f} "
                  f"{blocking / scheduled:>7.2f}x  "
                  f"{in_flight / 1e3 / steps:>12.2f} "
                  f"{100 * covered / max(in_flight, 1e-9):>12.0f}% "
                  f"{waits / 1e3 / steps:>9.2f} (blocking: "
                  f"{blocked / 1e3 / steps:>6.2f})")


if __name__ == "__main__":
    main()
