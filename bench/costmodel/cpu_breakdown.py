#!/usr/bin/env python3
"""The cost model's breakdown against a measured run on this machine
(issue 22, item 5).

For 2 and 4 CPU ranks: `tessera calibrate` fits a machine file from the
runtime's microbenchmarks; `tessera plan --breakdown --json`, pinned to one
plan of a small GPT, predicts its step term by term; the plan compiled
as pinned runs under `tessera run --time --trace`, whose per-kernel trace
gives the measured terms:

- gemm: nn.dot kernels; attention: nn.attention and its gradient;
- memory-bound: every other kernel of the compute stream but the
  optimizer's and the collectives (norms, elementwise chains, softmax,
  cross-entropy, copies);
- optimizer: nn.adamw; collectives: dist.* on the compute stream (blocking,
  exposed), each the least time any rank spent in it (what the others
  spent beyond it is waiting for the slowest rank: skew);
- the rest of the step (its wall time less its kernels) against the
  launches and the fixed per-step cost.

Each term's error is predicted / measured - 1. The trace counts every step
but the first (warm-up), the step time is the mean of those.

    python3 bench/costmodel/cpu_breakdown.py [--steps 6]
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")
TESSERA = os.path.join(BIN, "tessera")
# layers, hidden, heads, seq, vocab, batch: the middle GPT of step_time.py.
GPT = ["--layers", "4", "--hidden", "256", "--heads", "4", "--seq", "128",
       "--vocab", "1024", "--batch", "8"]
# The plans: (ranks, dp, tp).
PLANS = [(2, 2, 1), (2, 1, 2), (4, 2, 2), (4, 4, 1)]


# One thread per rank, in the calibration and the run alike.
ONE_THREAD = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


def run(command):
    return subprocess.run(command, check=True, capture_output=True, text=True,
                          env=ONE_THREAD).stdout


def predict(model, machine, ranks, dp, tp):
    out = run([TESSERA, "plan", model, "--machine", machine, "--devices",
               str(ranks), "--dp", str(dp), "--tp", str(tp), "--pp", "1",
               "--microbatches", "1", "--zero", "0", "--recompute", "none",
               "--sequence-parallel", "off", "--layout", "megatron",
               "--precision", "fp32", "--json", "--top", "1"])
    terms = json.loads(out)["plans"][0]["breakdown"]
    compute = terms["compute_s"]
    gemm = compute.get("gemm", 0)
    attention = compute.get("attention", 0)
    return {
        "gemm": gemm,
        "attention": attention,
        "memory-bound": sum(compute.values()) - gemm - attention,
        "optimizer": terms["optimizer_s"],
        "collectives": terms["tp_exposed_s"] + terms["dp_exposed_s"],
        "rest": terms["launch_s"] + terms["fixed_s"],
        "step": terms["total_s"],
    }


def measure(model, ranks, dp, tp, steps, directory):
    plan = os.path.join(directory, f"plan-{dp}x{tp}.plan")
    run([TESSERA, "compile", model, "--mesh", f"dp={dp},tp={tp}", "--train",
         "adamw", "-o", plan])
    trace = os.path.join(directory, f"trace-{dp}x{tp}")
    out = run([TESSERA, "run", plan, "--ranks", str(ranks), "--steps",
               str(steps), "--time", "--threads", "1", "--trace", trace])
    # Rank 0's trace, in order, each step the same instructions: the first
    # step's (the warm-up) left out. A blocking collective also waits for
    # the slowest rank: its time is the least any rank spent in it (the
    # rest, skew between the ranks, counts with the step's rest).
    ranks_events = []
    for rank in range(ranks):
        with open(os.path.join(trace, f"rank{rank}.json")) as f:
            ranks_events.append([e for e in json.load(f)["traceEvents"]
                                 if e.get("ph") == "X"])
    events = ranks_events[0]
    per_step = len(events) // steps
    first = per_step
    events = events[first:]
    totals = collections.Counter()
    for index, event in enumerate(events, first):
        name, seconds = event["name"], event["dur"] * 1e-6
        if event.get("tid") == 1:
            continue  # the communication stream overlaps
        if name == "nn.dot":
            totals["gemm"] += seconds
        elif name.startswith("nn.attention"):
            totals["attention"] += seconds
        elif name in ("nn.adamw", "nn.sgd"):
            totals["optimizer"] += seconds
        elif name.startswith("dist."):
            totals["collectives"] += min(
                r[index]["dur"] for r in ranks_events
                if index < len(r) and r[index]["name"] == name) * 1e-6
        else:
            totals["memory-bound"] += seconds
    measured = {k: v / (steps - 1) for k, v in totals.items()}
    span = (events[-1]["ts"] + events[-1]["dur"] - events[0]["ts"]) * 1e-6
    measured["step"] = span / (steps - 1)
    measured["rest"] = measured["step"] - sum(
        v for k, v in measured.items() if k != "step")
    mean = re.search(r"time: ([\d.]+) ms", out)
    return measured, float(mean.group(1)) / 1e3 if mean else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        model = os.path.join(directory, "gpt.mlir")
        run([TESSERA, "model", "gpt", *GPT, "--sharding", "megatron", "-o", model])
        machines = {}
        for ranks in sorted({p[0] for p in PLANS}):
            machines[ranks] = os.path.join(directory, f"cpu-{ranks}.json")
            print(run([TESSERA, "calibrate", "--ranks", str(ranks), "-o",
                       machines[ranks]]).strip())
        terms = ["gemm", "attention", "memory-bound", "optimizer", "collectives",
                 "rest", "step"]
        print(f"\n{'plan':>14} {'term':>13} {'predicted ms':>13} "
              f"{'measured ms':>12} {'error':>8}")
        for ranks, dp, tp in PLANS:
            predicted = predict(model, machines[ranks], ranks, dp, tp)
            measured, mean = measure(model, ranks, dp, tp, args.steps, directory)
            for term in terms:
                p, m = predicted.get(term, 0), measured.get(term, 0)
                error = f"{100 * (p / m - 1):+7.1f}%" if m > 0 else "      -"
                print(f"{f'{ranks} ranks {dp}x{tp}':>14} {term:>13} "
                      f"{1e3 * p:13.2f} {1e3 * m:12.2f} {error}")
            if mean:
                print(f"{'':>14} {'--time mean':>13} {'':>13} {1e3 * mean:12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
