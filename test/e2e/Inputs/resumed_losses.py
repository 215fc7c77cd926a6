"""resumed_losses.py WANT [--from N] GOT...: each GOT file's losses (one per
line) equal WANT's from its N-th (from 1) on, as many as GOT holds, within
1e-5 relative."""
import sys

args = sys.argv[1:]
want = [float(x) for x in open(args.pop(0)).read().split()]
first = 1
if args and args[0] == "--from":
    first = int(args[1])
    args = args[2:]
for path in args:
    got = [float(x) for x in open(path).read().split()]
    expected = want[first - 1:first - 1 + len(got)]
    if not got or len(expected) != len(got) or any(
            abs(g - w) > 1e-5 * abs(w) for g, w in zip(got, expected)):
        sys.exit(f"{path}: {got} against steps {first}.. of {expected}")
print(f"{len(args)} runs match")
