#!/usr/bin/env python3
"""All-to-all volume and model state per device against expert
parallelism (`tessera model --experts E --top-k K`, split over "ep").

Compiles a Mixtral-style Llama's AdamW train step (8 experts, top-2,
capacity factor 1.25) on ep = 1, 2, 4 and 8 (dp = tp = 1; the batch split
over "ep") and reports, per device:
  - the bytes each device sends per step in the all_to_all over "ep", read
    from the partitioned program, against the analytic value: per MoE
    layer, the dispatched tokens [b/ep, E, C, h] exchanged for experts before
    the experts and back after them, and the two gradients in the backward,
    each all_to_all sending (ep - 1)/ep of its buffer:
    4 (ep - 1)/ep (b/ep) E C h bytes;
  - the parameters and optimizer state of the compiled plan against the
    one-device step's (the experts' share falls as 1/ep).

With --run, the step also runs on ep = 2 CPU ranks and on one device (a
smaller batch, --run-batch), fastest of 5 steps: what the exchange costs
beside the work it splits.

Then `tessera plan` prices a larger model's step (the same shape at
hidden 2048, sequence 2048, batch 64: bandwidth, not latency, bounds its
exchanges) on 8 devices at ep = 2, 4 and 8 (pinned) on a switched machine (dgx-h100: NVSwitch, full bisection) and
on a torus (tpu-torus-3d: rings of 8 along each dimension): its "exposed
EP all-to-all" term, and the share of the step. Around a ring an
all-to-all is bound by the bisection (n/4 of a buffer per device's links
against the (n - 1)/n a switch carries), so the torus falls behind as ep
grows.

Run from the repository root after building:
    python3 bench/partition/expert_parallel.py [--run]
"""

import argparse
import math
import os
import re
import subprocess
import tempfile

LAYERS, HIDDEN, HEADS, KV_HEADS, FFN, SEQ, BATCH = 4, 512, 8, 2, 1024, 256, 16
EXPERTS, TOP_K, CAPACITY_FACTOR = 8, 2, 1.25


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--run", action="store_true",
                        help="also time the step on ep = 2 ranks")
    parser.add_argument("--run-batch", type=int, default=4)
    args = parser.parse_args()
    tessera = os.path.join(args.bin, "tessera")
    capacity = min(SEQ, math.ceil(CAPACITY_FACTOR * TOP_K * SEQ / EXPERTS))
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "moe.mlir")
        generate(tessera, model, BATCH)
        print(f"Llama {LAYERS} layers, hidden {HIDDEN}, {EXPERTS} experts of "
              f"width {FFN}, top-{TOP_K}, capacity {capacity} per sequence of "
              f"{SEQ}, batch {BATCH}, f32, AdamW")
        print(f"{'ep':>3} {'all_to_all':>10} {'sent MB':>8} {'analytic MB':>12}"
              f" {'params MB':>10} {'opt. state MB':>14} {'x of ep=1':>10}")
        base = None
        for ep in (1, 2, 4, 8):
            exchanges, sent, params, state = measure(tessera, work, model, ep)
            base = base or params + state
            buffer = BATCH / ep * EXPERTS * capacity * HIDDEN * 4
            analytic = LAYERS * 4 * (ep - 1) / ep * buffer
            print(f"{ep:>3} {exchanges:>10} {sent / 1e6:>8.1f} "
                  f"{analytic / 1e6:>12.1f} {params / 1e6:>10.1f} "
                  f"{state / 1e6:>14.1f} {(params + state) / base:>10.3f}")
        if args.run:
            time_steps(args, tessera, work)
        large = os.path.join(work, "large.mlir")
        generate(tessera, large, 64, hidden=2048, seq=2048)
        price_topologies(tessera, large)


def price_topologies(tessera, model):
    """The planner's all-to-all term at each ep on a switch and a torus."""
    print(f"\nplanned on 8 devices, ep pinned: exposed EP all-to-all (ms) "
          f"and its share of the step")
    print(f"{'ep':>3} {'dgx-h100':>16} {'tpu-torus-3d':>16}")
    for ep in (2, 4, 8):
        cells = []
        for machine in ("dgx-h100", "tpu-torus-3d"):
            output = subprocess.run(
                [tessera, "plan", model, "--machine", machine, "--devices",
                 "8", "--ep", str(ep), "--breakdown", "--top", "1"],
                check=True, capture_output=True, text=True).stdout
            term = re.search(r"exposed EP all-to-all +([0-9.e+-]+) +"
                             r"([0-9.]+)%", output)
            cells.append(f"{float(term[1]) * 1e3:8.3f} ({float(term[2]):4.1f}%)")
        print(f"{ep:>3} {cells[0]:>16} {cells[1]:>16}")


def generate(tessera, path, batch, hidden=HIDDEN, seq=SEQ):
    subprocess.run([tessera, "model", "llama", "--layers", str(LAYERS),
                    "--hidden", str(hidden), "--heads", str(HEADS),
                    "--kv-heads", str(KV_HEADS), "--ffn-hidden", str(FFN),
                    "--seq", str(seq), "--vocab", "512", "--batch",
                    str(batch), "--experts", str(EXPERTS), "--top-k",
                    str(TOP_K), "--capacity-factor", str(CAPACITY_FACTOR),
                    "--sharding", "megatron", "-o", path],
                   check=True, capture_output=True)


def time_steps(args, tessera, work):
    """The fastest step on ep = 2 ranks and on one device."""
    print(f"\nsteps: batch {args.run_batch}; fastest of 5 steps")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1")
    model = os.path.join(work, "run.mlir")
    generate(tessera, model, args.run_batch)
    for ep in (1, 2):
        plan = os.path.join(work, "run.plan")
        subprocess.run([tessera, "compile", model, "--mesh",
                        f"dp=1,ep={ep},tp=1", "--train", "adamw", "-o", plan],
                       check=True, capture_output=True)
        output = subprocess.run(
            ["mpirun", "-np", str(ep), os.path.join(args.bin, "tessera-run"),
             plan, "--steps", "5", "--time"], check=True,
            capture_output=True, text=True, env=env).stdout
        fastest = float(re.search(r"fastest ([0-9.]+) ms", output)[1])
        print(f"ep={ep}: {fastest:8.1f} ms")


def measure(tessera, work, model, ep):
    """The all_to_all over "ep" in the step, the bytes a device sends in
    them, and the plan's parameters and optimizer state per device."""
    mesh = f"dp=1,ep={ep},tp=1"
    output = subprocess.run(
        [tessera, "compile", model, "--mesh", mesh, "--train", "adamw", "-o",
         os.path.join(work, "moe.plan")],
        check=True, capture_output=True, text=True).stdout
    peak = re.search(r"memory at the peak: parameters (\d+), gradients \d+, "
                     r"optimizer state (\d+)", output)
    params, state = int(peak[1]), int(peak[2])
    part = os.path.join(work, "part.mlir")
    subprocess.run([tessera, "compile", model, "--mesh", mesh, "--train",
                    "adamw", "--emit=partitioned", "-o", part], check=True,
                   capture_output=True)
    exchanges = sent = 0
    with open(part) as program:
        for line in program:
            collective = re.search(r"dist\.all_to_all .*on @mesh \[\"ep\"\].*"
                                   r": tensor<([0-9x]+)xf32>", line)
            if not collective:
                continue
            elements = 1
            for d in collective[1].split("x"):
                elements *= int(d)
            exchanges += 1
            sent += 4 * elements * (ep - 1) / ep
    return exchanges, sent, params, state


if __name__ == "__main__":
    main()
