#!/usr/bin/env python3
"""Pipeline bubble and activation memory per schedule, against theory.

Compiles a GPT train step (AdamW) with --pp P --microbatches M under
GPipe, 1F1B and interleaved schedules, runs it on P CPU ranks with
`tessera-run --trace`, and measures the bubble from each rank's pipeline
units (the "pipeline units" track of the trace: F<stage>.<microbatch>,
B<stage>.<microbatch>, update): the time a rank spends between units
waiting for its neighbours, relative to the time it computes in units,
which theory puts at (P-1)/M for GPipe and 1F1B and (P-1)/(v*M) for the
interleaved schedule with v stages per rank, and (P-1)/(3M) for ZB-H1
when forward, input-gradient and weight-gradient units take equal time
(the zero-bubble paper's estimate). It also reads each plan's
activation peak per stage from `tessera compile`: 1F1B holds at most P
microbatches' activations on the first stage, GPipe all M.

Two ranks fit this project's 2-core machines; with more, ranks share cores
and the measured bubble says little. Run from the repository root after
building:
    python3 bench/pipeline/bubble.py
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

# Name, P, flags. Pipelines of two ranks by default (see above).
CONFIGS = [
    ("gpipe m=2", 2, ["--microbatches", "2", "--schedule", "gpipe"]),
    ("gpipe m=4", 2, ["--microbatches", "4", "--schedule", "gpipe"]),
    ("gpipe m=8", 2, ["--microbatches", "8", "--schedule", "gpipe"]),
    ("1f1b m=2", 2, ["--microbatches", "2", "--schedule", "1f1b"]),
    ("1f1b m=4", 2, ["--microbatches", "4", "--schedule", "1f1b"]),
    ("1f1b m=8", 2, ["--microbatches", "8", "--schedule", "1f1b"]),
    ("zb-h1 m=4", 2, ["--microbatches", "4", "--schedule", "zb-h1"]),
    ("zb-h1 m=8", 2, ["--microbatches", "8", "--schedule", "zb-h1"]),
    ("interleaved v=2 m=4", 2, ["--microbatches", "4", "--schedule",
                                "interleaved", "--virtual", "2"]),
    ("interleaved v=2 m=8", 2, ["--microbatches", "8", "--schedule",
                                "interleaved", "--virtual", "2"]),
]


def units(trace_file):
    """The pipeline units of a rank's trace, per step: (name, start, end)."""
    with open(trace_file) as f:
        events = json.load(f)["traceEvents"]
    spans = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events
                   if e.get("ph") == "X" and e.get("tid") == -1)
    steps, step = [], []
    for start, end, name in spans:
        step.append((name, start, end))
        if name == "update":
            steps.append(step)
            step = []
    return steps


def busy(trace_file):
    """Per step, (busy, idle) microseconds of the compute thread within
    the units: kernels are busy, receives and waits idle."""
    with open(trace_file) as f:
        events = json.load(f)["traceEvents"]
    compute = [e for e in events if e.get("ph") == "X" and e.get("tid") == 0]
    result = []
    for step in units(trace_file):
        begin = step[0][1]
        end = [s for s in step if s[0] != "update"][-1][2]
        work = sum(e["dur"] for e in compute
                   if begin <= e["ts"] < end and not
                   (e["name"].startswith("recv") or e["name"] == "wait"))
        result.append((work, (end - begin) - work))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessera", default="build/bin/tessera")
    parser.add_argument("--runner", default="build/bin/tessera-run")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--model", default="--layers 8 --hidden 128 --heads 4 "
                        "--seq 32 --vocab 256 --batch 16")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        model = f"{work}/gpt.mlir"
        subprocess.run([args.tessera, "model", "gpt", "--sharding", "megatron",
                        *args.model.split(), "-o", model], check=True,
                       capture_output=True)
        print(f"GPT {args.model}, AdamW, {args.steps} steps (the first "
              "skipped); bubble = time between units / time in units")
        print(f"{'schedule':22} {'P':>2} {'bubble':>8} {'theory':>8} "
              f"{'stage 0 activations':>20}")
        for name, ranks, flags in CONFIGS:
            plan = f"{work}/{name.replace(' ', '_')}.plan"
            out = subprocess.run(
                [args.tessera, "compile", model, "--mesh", "dp=1,tp=1",
                 "--pp", str(ranks), "--train", "adamw", *flags, "-o", plan],
                capture_output=True, text=True, check=True).stdout
            peaks = re.findall(r"each at its own peak: .*activations (\d+)",
                               out)
            trace = f"{work}/{name.replace(' ', '_')}"
            subprocess.run(["mkdir", "-p", trace], check=True)
            # OpenMPI refuses root without these; one BLAS thread per rank.
            env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                       OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                       OPENBLAS_NUM_THREADS="1")
            subprocess.run(["mpirun", "--oversubscribe", "-np", str(ranks),
                            args.runner, plan, "--steps", str(args.steps),
                            "--trace", trace], check=True,
                           capture_output=True, env=env)
            ratios = []
            for rank in range(ranks):
                for work_us, idle_us in busy(f"{trace}/rank{rank}.json")[1:]:
                    ratios.append(idle_us / work_us)
            m = int(flags[flags.index("--microbatches") + 1])
            v = (int(flags[flags.index("--virtual") + 1])
                 if "--virtual" in flags else 1)
            theory = (ranks - 1) / (v * m)
            if "zb-h1" in flags:
                theory /= 3
            print(f"{name:22} {ranks:>2} {statistics.median(ratios):8.3f} "
                  f"{theory:8.3f} {int(peaks[0]) / 1024:17.0f} KiB")


if __name__ == "__main__":
    main()
