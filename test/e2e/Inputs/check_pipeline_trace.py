"""Checks that each rank of a pipelined run followed its schedule exactly.

    check_pipeline_trace.py DIR P M SCHEDULE [V]

reads the traces `tessera-run --trace DIR` wrote and compares each step's
pipeline units on each rank (F<stage>.<microbatch>, B<stage>.<microbatch>,
then update) with the order the schedule prescribes, worked out here from
its definition: GPipe runs all forwards then all backwards; 1F1B runs
P - rank - 1 forwards, then one forward and one backward in turn, then
the remaining backwards; interleaved is Megatron-LM's schedule over V
stages per rank (plain 1F1B for V = 1, as Megatron-LM runs it); ZB-H1 is
1F1B with each backward split into B (input gradients) and W (weight
gradients), a microbatch's W run right after the B of the microbatch rank
later, the last rank of them at the end. A unit without ops leaves no
trace: the first stage's B (it sends no gradient).
"""

import json
import sys


def expected(rank, p, m, schedule, v):
    if schedule == "interleaved" and v > 1:
        total = m * v

        def microbatch(k):
            return k // (p * v) * p + k % p

        def forward(k):
            return f"F{(k // p) % v * p + rank}.{microbatch(k)}"

        def backward(k):
            return f"B{(v - 1 - (k // p) % v) * p + rank}.{microbatch(k)}"

        warmup = min((p - rank - 1) * 2 + (v - 1) * p, total)
        order = [forward(k) for k in range(warmup)]
        for k in range(total - warmup):
            order += [forward(warmup + k), backward(k)]
        order += [backward(k) for k in range(total - warmup, total)]
        return order + ["update"]
    warmup = m if schedule == "gpipe" else min(p - rank - 1, m)
    order = [f"F{rank}.{k}" for k in range(warmup)]
    for k in range(m - warmup):
        order += [f"F{rank}.{warmup + k}", f"B{rank}.{k}"]
    order += [f"B{rank}.{k}" for k in range(m - warmup, m)]
    if schedule == "zb-h1":
        order = with_weights(order, rank, p, m)
    return order + ["update"]


def with_weights(order, rank, p, m):
    """Inserts W<rank>.k into a 1F1B order: W(k) right after B(k + rank),
    the last rank of them at the end."""
    result = []
    for unit in order:
        result.append(unit)
        k = int(unit.split(".")[1]) - rank
        if unit.startswith("B") and k >= 0:
            result.append(f"W{rank}.{k}")
    result += [f"W{rank}.{k}" for k in range(max(m - rank, 0), m)]
    if rank == 0:
        result = [unit for unit in result if not unit.startswith("B")]
    return result


def main():
    directory, p, m, schedule = sys.argv[1], int(sys.argv[2]), \
        int(sys.argv[3]), sys.argv[4]
    v = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    for rank in range(p):
        events = json.load(open(f"{directory}/rank{rank}.json"))["traceEvents"]
        units = [e["name"] for e in sorted(
            (e for e in events if e["ph"] == "X" and e["tid"] == -1),
            key=lambda e: e["ts"])]
        want = expected(rank, p, m, schedule, v)
        steps = len(units) // len(want)
        if steps == 0 or units != want * steps:
            sys.exit(f"rank {rank}: ran {units}, expected {steps} times "
                     f"{want}")
        print(f"rank {rank}: {steps} steps of {' '.join(want)}")


if __name__ == "__main__":
    main()
