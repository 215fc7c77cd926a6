"""Checks the merged trace `tessera-run --trace DIR` writes (DIR/trace.json)
for RANKS ranks and STEPS steps: one process per rank, a marker where each
step starts on each rank, every instruction's span carrying its step and its
tensors (a kernel's inputs and outputs, a collective's group, a transfer's
peer and tensor), and each send's arrow ending at a receive on its peer:
check_merged_trace.py DIR RANKS STEPS."""
import json
import sys

directory, ranks, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
events = json.load(open(f"{directory}/trace.json"))["traceEvents"]
if sorted({e["pid"] for e in events}) != list(range(ranks)):
    sys.exit(f"processes {sorted({e['pid'] for e in events})}")
for rank in range(ranks):
    markers = [e["name"] for e in events if e["ph"] == "i" and e["pid"] == rank]
    if markers != [f"step {s}" for s in range(1, steps + 1)]:
        sys.exit(f"rank {rank}: step markers {markers}")
spans = [e for e in events if e["ph"] == "X" and "instruction" in e["args"]]
for span in spans:
    args = span["args"]
    wanted = ("inputs" if span["name"].startswith("nn.") else
              "group" if span["name"].startswith("dist.") else
              "peer" if span["name"].startswith(("send", "recv")) else "step")
    if not 1 <= args["step"] <= steps or wanted not in args:
        sys.exit(f"span without its step or {wanted}: {span}")
starts = {e["id"]: e["pid"] for e in events if e["ph"] == "s"}
ends = {e["id"]: e["pid"] for e in events if e["ph"] == "f"}
if not starts or starts.keys() != ends.keys():
    sys.exit(f"{len(starts)} arrows start, {len(ends)} end, not the same")
if any(starts[i] == ends[i] for i in starts):
    sys.exit("an arrow starts and ends on one rank")
print(f"{ranks} ranks, {len(spans)} instruction spans, {len(starts)} arrows")
