"""Checks the Chrome traces `tessera-run --trace DIR` writes, one per rank.

Each must be valid JSON with complete ("X") events on the compute thread
(tid 0) and, for a scheduled plan, on the communication thread (tid 1),
and at least one collective in flight on the communication thread must
overlap a kernel on the compute thread in time: what the schedule asks for.
"""

import json
import sys


def main():
    directory, ranks = sys.argv[1], int(sys.argv[2])
    for rank in range(ranks):
        path = f"{directory}/rank{rank}.json"
        events = json.load(open(path))["traceEvents"]
        spans = [e for e in events if e["ph"] == "X"]
        compute = [e for e in spans if e["tid"] == 0]
        comm = [e for e in spans if e["tid"] == 1]
        if any(e["pid"] != rank for e in spans):
            sys.exit(f"{path}: an event of another process")
        overlapped = [
            c for c in comm
            if any(k["ts"] < c["ts"] + c["dur"] and c["ts"] < k["ts"] + k["dur"]
                   and k["name"].startswith("nn.") for k in compute)
        ]
        print(f"rank {rank}: {len(compute)} compute events, {len(comm)} "
              f"communication events, {len(overlapped)} overlapping a kernel")
        if not compute or not comm or not overlapped:
            print(f"FAIL: {path} shows no overlap")
            return 1
    print("trace: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
