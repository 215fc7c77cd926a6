"""Checks Hogwild runs against one thread's:
check_hogwild.py ONE OTHER... TOLERANCE. Each run trains (its mean loss
over the last 200 steps is below a quarter of one thread's over the first
20) and ends within TOLERANCE (absolute: the losses are excess log-losses
near their optimum 0) above one thread's mean over the last 200 steps."""
import sys

runs = [[float(x) for x in open(path).read().split()]
        for path in sys.argv[1:-1]]
tolerance = float(sys.argv[-1])
start = sum(runs[0][:20]) / 20
ends = [sum(run[-200:]) / 200 for run in runs]
trains = all(end < start / 4 for end in ends)
close = all(end <= ends[0] + tolerance for end in ends[1:])
print(f"first 20 steps {start:.4f}; last 200: "
      f"{', '.join(f'{end:.4f}' for end in ends)}")
print(f"trains: {'yes' if trains else 'NO'}")
print(f"within {tolerance} of the first's: {'yes' if close else 'NO'}")
sys.exit(0 if trains and close else 1)
