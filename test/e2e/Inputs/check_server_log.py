"""Checks a parameter-server job's logs (tessera-run --ps-dir DIR):

  check_server_log.py DIR [--ssp K] [--falls LOSSES] [--joined N]
                          [--dropped W] [--kept W] [--restored]

Each server<s>.log has a line per event, its last field the wall time:
"hello W FIRST", "pull W CLOCK SLOWEST VERSION", "push W STEP VERSION
STALENESS LOSS", "drop W", "checkpoint VERSION", "restore VERSION". With --ssp K, no pull may be
granted to a worker more than K steps ahead of the slowest (CLOCK - SLOWEST
<= K); --falls: the last loss of the --dump-losses file is below the first;
--joined N: some worker past the job's N pushed; --dropped W: worker W was
dropped and others pushed after; --kept W: worker W pushed to every server
and was dropped by none before its last push there (the "drop" of its
goodbye comes after); --restored: a server restarted from its
checkpoint ("restore VERSION") and took pushes after."""
import glob
import sys

args = sys.argv[2:]
def option(name):
    return args[args.index(name) + 1] if name in args else None

logs = {}
for path in sorted(glob.glob(sys.argv[1] + "/server*.log")):
    logs[path] = [line.split() for line in open(path) if line.strip()]
if not logs:
    sys.exit("no server logs in " + sys.argv[1])
pushes = sum(1 for lines in logs.values() for f in lines if f[0] == "push")
print(f"{len(logs)} servers, {pushes} pushes")

if option("--ssp") is not None:
    bound = int(option("--ssp"))
    ahead = max(int(f[2]) - int(f[3]) for lines in logs.values()
                for f in lines if f[0] == "pull")
    print(f"most steps ahead of the slowest at a pull: {ahead} "
          f"{'ok' if ahead <= bound else 'OVER THE BOUND'}")
    if ahead > bound:
        sys.exit(1)
if option("--falls") is not None:
    losses = [float(x) for x in open(option("--falls")).read().split()]
    falls = len(losses) > 1 and losses[-1] < losses[0]
    print(f"loss falls: {'yes' if falls else 'NO'}")
    if not falls:
        sys.exit(1)
if option("--joined") is not None:
    workers = int(option("--joined"))
    joined = {f[1] for lines in logs.values() for f in lines
              if f[0] == "push" and int(f[1]) >= workers}
    print(f"joined workers pushed: {'yes' if joined else 'NO'}")
    if not joined:
        sys.exit(1)
if option("--dropped") is not None:
    worker = option("--dropped")
    for lines in logs.values():
        drops = [i for i, f in enumerate(lines)
                 if f[0] == "drop" and f[1] == worker]
        after = drops and any(f[0] == "push" and f[1] != worker
                              for f in lines[drops[0]:])
        if not after:
            sys.exit(f"worker {worker} was not dropped with training going on")
    print(f"worker {worker} dropped, training went on: yes")
if option("--kept") is not None:
    worker = option("--kept")
    for path, lines in logs.items():
        pushes = [i for i, f in enumerate(lines)
                  if f[0] == "push" and f[1] == worker]
        drops = [i for i, f in enumerate(lines)
                 if f[0] == "drop" and f[1] == worker]
        if not pushes or any(i < pushes[-1] for i in drops):
            sys.exit(f"worker {worker} was dropped mid-run by {path}")
    print(f"worker {worker} kept: yes")
if "--restored" in args:
    restored = any(
        any(f[0] == "restore" and
            any(g[0] == "push" for g in lines[i:])
            for i, f in enumerate(lines))
        for lines in logs.values())
    print(f"a server restarted from its checkpoint: "
          f"{'yes' if restored else 'NO'}")
    if not restored:
        sys.exit(1)
