#!/usr/bin/env python3
"""Activation memory and bytes sent per device against context
parallelism, by each way of computing attention over a split sequence
(`tessera model --context-parallel ring|ulysses|all-gather`).

Compiles a long-sequence GPT's AdamW train step on cp = 1, 2, 4 and 8
(dp = tp = 1) and reports, per device, the compiled peak of activations
plus communication buffers (from `tessera compile`'s memory line) against
the goal of 1/cp of the one-device peak, and the bytes each device sends
per step in the sequence's collectives, read from the partitioned
program, against the analytic value per layer:
  - ring: the keys and values ([b, s/cp, h] each) sent cp - 1 times in the
    forward, again in the backward with their gradients, which are sent cp
    times: (2 (cp - 1) + 2 (cp - 1) + 2 cp) b s h / cp;
  - ulysses: four all_to_all of a [b, s/cp, h] activation forward (queries,
    keys, values, output) and four backward, each sending (cp - 1)/cp of
    it;
  - all-gather: the keys and values gathered (each device sends its piece
    to cp - 1 others) forward and again backward, and their gradients
    reduce-scattered: 6 (cp - 1) b s h / cp (ring algorithms).

With --run, each kind's plan also runs on cp = 2 CPU ranks (a smaller
sequence, --run-seq) and its fastest step is reported beside the
one-device step: what the ranks spend on attention, communication and
waiting. The causal ring runs in zigzag order (--tessera-zigzag-context),
so that every rank computes the same share; bench/partition/ring_balance.py
compares it with natural order. The ring then runs again
compiled with --overlap --prefetch 2, traced: the share of the last
rank's ring transfers (on the communication stream) that ran while it
computed an attention block.

Run from the repository root after building:
    python3 bench/partition/context_parallel.py [--run]
"""

import argparse
import os
import re
import subprocess
import tempfile

LAYERS, HIDDEN, HEADS, SEQ, BATCH = 4, 512, 16, 8192, 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--run", action="store_true",
                        help="also time each kind's step on cp = 2 ranks")
    parser.add_argument("--run-seq", type=int, default=2048)
    args = parser.parse_args()
    tessera = os.path.join(args.bin, "tessera")
    with tempfile.TemporaryDirectory() as work:
        print(f"GPT {LAYERS} layers, hidden {HIDDEN}, {HEADS} heads, "
              f"sequence {SEQ}, batch {BATCH}, f32, AdamW, fused attention")
        print(f"{'kind':<11} {'cp':>3} {'activations MB':>15} "
              f"{'+ comm MB':>10} {'x of cp=1':>10} {'goal 1/cp':>10} "
              f"{'sent MB':>8} {'analytic MB':>12}")
        for kind in ("ring", "ulysses", "all-gather"):
            model = os.path.join(work, f"{kind}.mlir")
            subprocess.run([tessera, "model", "gpt", "--layers", str(LAYERS),
                            "--hidden", str(HIDDEN), "--heads", str(HEADS),
                            "--seq", str(SEQ), "--vocab", "256", "--batch",
                            str(BATCH), "--sharding", "megatron",
                            "--context-parallel", kind, "-o", model],
                           check=True, capture_output=True)
            base = None
            for cp in (1, 2, 4, 8):
                activations, total, sent = measure(tessera, work, model, cp)
                base = base or total
                activation = BATCH * SEQ * HIDDEN / cp * 4
                analytic = LAYERS * activation * {
                    "ring": 2 * (cp - 1) + 2 * (cp - 1) + 2 * cp
                    if cp > 1 else 0,
                    "ulysses": 8 * (cp - 1) / cp,
                    "all-gather": 6 * (cp - 1)}[kind]
                print(f"{kind:<11} {cp:>3} {activations / 1e6:>15.1f} "
                      f"{total / 1e6:>10.1f} {total / base:>10.3f} "
                      f"{1 / cp:>10.3f} {sent / 1e6:>8.1f} "
                      f"{analytic / 1e6:>12.1f}")
        if args.run:
            time_steps(args, tessera, work)


def time_steps(args, tessera, work):
    """The fastest step of each kind on cp = 2 ranks, and on one device."""
    print(f"\nsteps: GPT {LAYERS} layers, hidden {HIDDEN}, sequence "
          f"{args.run_seq}, batch {BATCH}; fastest of 5 steps")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for kind, cp in (("one device", 1), ("ring", 2), ("ulysses", 2),
                     ("all-gather", 2)):
        model = os.path.join(work, "run.mlir")
        subprocess.run([tessera, "model", "gpt", "--layers", str(LAYERS),
                        "--hidden", str(HIDDEN), "--heads", str(HEADS),
                        "--seq", str(args.run_seq), "--vocab", "256",
                        "--batch", str(BATCH), "--sharding", "megatron",
                        "--context-parallel",
                        "ring" if cp == 1 else kind, "-o", model],
                       check=True, capture_output=True)
        plan = os.path.join(work, "run.plan")
        subprocess.run([tessera, "compile", model, "--mesh",
                        f"dp=1,cp={cp},tp=1", "--train", "adamw", "-o", plan],
                       check=True, capture_output=True)
        output = subprocess.run(
            ["mpirun", "-np", str(cp), os.path.join(args.bin, "tessera-run"),
             plan, "--steps", "5", "--time"], check=True,
            capture_output=True, text=True, env=env).stdout
        fastest = float(re.search(r"fastest ([0-9.]+) ms", output)[1])
        print(f"{kind:<11} cp={cp}: {fastest:8.1f} ms")
        if kind != "ring":
            continue
        subprocess.run([tessera, "compile", model, "--mesh",
                        f"dp=1,cp={cp},tp=1", "--train", "adamw", "--overlap",
                        "--prefetch", "2", "-o", plan], check=True,
                       capture_output=True)
        trace = os.path.join(work, "trace")
        os.makedirs(trace, exist_ok=True)
        subprocess.run(["mpirun", "-np", str(cp),
                        os.path.join(args.bin, "tessera-run"), plan, "--steps",
                        "3", "--trace", trace], check=True,
                       capture_output=True, env=env)
        hidden, total = get_hidden_transfers(
            os.path.join(trace, "trace.json"), cp - 1)
        print(f"ring, --overlap --prefetch 2: {100 * hidden / total:.0f}% of "
              f"rank {cp - 1}'s {total / 1e3:.1f} ms of ring transfers in the "
              f"last step ran under an attention block")


def get_hidden_transfers(path, rank):
    """The microseconds of `rank`'s collective permutes in the trace's last
    step that overlap its attention blocks, and their total."""
    import json
    with open(path) as file:
        events = [e for e in json.load(file)["traceEvents"]
                  if e.get("ph") == "X" and e.get("pid") == rank]
    last = max(e["args"]["step"] for e in events
               if "step" in e.get("args", {}))
    events = [e for e in events if e.get("args", {}).get("step") == last]
    blocks = [(e["ts"], e["ts"] + e["dur"]) for e in events
              if e["name"].startswith("nn.attention_block")]
    hidden = total = 0
    for e in events:
        if e["name"] != "dist.collective_permute":
            continue
        begin, end = e["ts"], e["ts"] + e["dur"]
        total += end - begin
        hidden += sum(max(0, min(end, b) - max(begin, a)) for a, b in blocks)
    return hidden, total


def measure(tessera, work, model, cp):
    """The compiled peak of activations, and of activations and
    communication, and the bytes sent in the sequence's collectives over
    "cp" (those of activations)."""
    mesh = f"dp=1,cp={cp},tp=1"
    output = subprocess.run(
        [tessera, "compile", model, "--mesh", mesh, "--train", "adamw", "-o",
         os.path.join(work, "gpt.plan")],
        check=True, capture_output=True, text=True).stdout
    peak = re.search(r"memory at the peak: .*activations (\d+), "
                     r"communication (\d+)", output)
    activations, communication = int(peak[1]), int(peak[2])
    part = os.path.join(work, "part.mlir")
    subprocess.run([tessera, "compile", model, "--mesh", mesh, "--train",
                    "adamw", "--emit=partitioned", "-o", part], check=True,
                   capture_output=True)
    sent = 0
    with open(part) as program:
        for line in program:
            collective = re.search(
                r"dist\.(all_to_all|collective_permute|all_gather|"
                r"reduce_scatter) .*on @mesh \[\"cp\"\].*: "
                r"tensor<([0-9x]+)xf32>", line)
            # The sequence's tensors (rank 3 or 4); a weight's gradient
            # and update over cp (Ulysses splits them) are the step's
            # data-parallel traffic.
            if not collective or collective[2].count("x") < 2:
                continue
            elements = 1
            for d in collective[2].split("x"):
                elements *= int(d)
            piece = 4 * elements
            sent += {"all_to_all": piece * (cp - 1) / cp,
                     "collective_permute": piece,
                     # Its operand is the piece; each goes to cp - 1 others.
                     "all_gather": piece * (cp - 1),
                     # Its operand is whole; cp - 1 pieces leave.
                     "reduce_scatter": piece * (cp - 1) / cp}[collective[1]]
    return activations, activations + communication, sent

if __name__ == "__main__":
    main()
