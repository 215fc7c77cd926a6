"""Prints each plan of `tessera plan --json` (stdin) as what two graphs of
one model must share: its choices, its collectives' time and its model
state; not the compute and launches, which follow each graph's own ops (and
so may order plans of nearly one step time differently: sorted)."""
import json
import sys

KEYS = ["dp", "tp", "pp", "microbatches", "zero", "reshard_after_forward",
        "schedule", "virtual_stages", "recompute", "sequence_parallel",
        "layout", "tp_comm_s", "dp_comm_s", "pp_comm_s", "param_bytes",
        "grad_bytes", "optimizer_bytes"]
lines = [" ".join(f"{key}={plan[key]:.6g}" if isinstance(plan[key], float)
                  else f"{key}={plan[key]}" for key in KEYS)
         for plan in json.load(sys.stdin)["plans"]]
print("\n".join(sorted(lines)))
