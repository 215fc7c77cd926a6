"""Compares two --dump-losses files (one loss per line) within a relative
tolerance: compare_losses.py A B TOLERANCE."""
import sys

a = [float(line) for line in open(sys.argv[1]) if line.strip()]
b = [float(line) for line in open(sys.argv[2]) if line.strip()]
tolerance = float(sys.argv[3])
if len(a) != len(b) or not a:
    sys.exit(f"expected two equal, non-empty loss lists, got {len(a)} and "
             f"{len(b)} steps")
worst = max(abs(x - y) / max(abs(x), abs(y), 1e-30) for x, y in zip(a, b))
print(f"{len(a)} steps, max relative difference {worst:.2e} "
      f"{'ok' if worst <= tolerance else 'FAIL'}")
sys.exit(0 if worst <= tolerance else 1)
