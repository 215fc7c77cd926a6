"""Checks that no run ends above the reference's final loss by more than a
relative tolerance: compare_final_loss.py REFERENCE OTHER... TOLERANCE.

Asynchronous training applies each worker's gradient as a step of its
own, so after as many steps per worker it has made more updates than
synchronous training and may end lower; what it must not do is train
worse (stale gradients that slow or spoil convergence)."""
import sys

def final(path):
    return [float(x) for x in open(path).read().split()][-1]

reference = final(sys.argv[1])
tolerance = float(sys.argv[-1])
worst = max(final(p) / reference - 1 for p in sys.argv[2:-1])
print(f"final losses: {reference:.6f} and "
      f"{', '.join(f'{final(p):.6f}' for p in sys.argv[2:-1])}; "
      f"none above the first's by more than {tolerance:.0%}: "
      f"{'yes' if worst <= tolerance else 'NO'} ({worst:+.1%})")
sys.exit(0 if worst <= tolerance else 1)
