"""Checks a PipeDream or 2BW run's trace: each microbatch's forward and
backward on a stage read one weights version, and no flush separates the
steps.

    check_weight_versions.py DIR P [pipedream]

reads the traces `tessera-run --trace DIR` wrote for P pipeline ranks. Each
unit span (F<stage>.<microbatch>, B<stage>.<microbatch>) carries the step it
belongs to and the weights version it read (the runtime's record of which
step's copy of the weight stash it addressed). For every step, microbatch
and stage there must be one forward and one backward, reading the same
version. Under 2BW that version is the step before's (the first two steps
read the initial weights, version 0); under PipeDream, rank r's latest when
the forward ran: step t (from 0) reads its updates up to step t - (P - r),
version t - (P - r - 1), at least 0. A backward that a rank runs after the
next step's first forward shows the missing flush; the script counts them.
"""

import json
import sys

directory, ranks = sys.argv[1], int(sys.argv[2])
pipedream = sys.argv[3:] == ["pipedream"]
pairs = 0
late = 0
problems = []
for rank in range(ranks):
    events = json.load(open(f"{directory}/rank{rank}.json"))["traceEvents"]
    units = [e for e in events if e["ph"] == "X" and e["tid"] == -1
             and e["name"][0] in "FB"]
    seen = {}
    first_forward = {}
    for e in units:
        kind, stage = e["name"][0], e["name"][1:].split(".")[0]
        args = e["args"]
        key = (stage, args["step"], args["microbatch"])
        if "weights_version" not in args:
            problems.append(f"rank {rank}: {e['name']} has no weights version")
            continue
        seen.setdefault(key, {})[kind] = (args["weights_version"], e["ts"])
        if kind == "F":
            first_forward.setdefault(args["step"], e["ts"])
    for (stage, step, microbatch), kinds in sorted(seen.items()):
        name = f"rank {rank}: stage {stage} step {step} microbatch {microbatch}"
        if set(kinds) != {"F", "B"}:
            problems.append(f"{name}: only {''.join(sorted(kinds))}")
            continue
        (forward, _), (backward, ts) = kinds["F"], kinds["B"]
        lag = ranks - rank - 1 if pipedream else 1
        if forward != backward or forward != max(step - 1 - lag, 0):
            problems.append(f"{name}: forward reads version {forward}, "
                            f"backward {backward}")
            continue
        pairs += 1
        if step + 1 in first_forward and ts > first_forward[step + 1]:
            late += 1
for problem in problems[:10]:
    print(problem)
what = ("the rank's latest weights" if pipedream else
        "the step before's weights")
print(f"{pairs} microbatch runs: forward and backward at {what}; "
      f"{late} backwards after the next step's first forward")
