"""Reads `tessera compile` summaries and says whether the activation peak
("memory, each at its own peak") strictly decreases from file to file. Each
file is named by its last suffix (%t.none: "none")."""

import re
import sys

peaks = []
for path in sys.argv[1:]:
    with open(path) as summary:
        match = re.search(r"each at its own peak: .*activations (\d+)",
                          summary.read())
    if not match:
        sys.exit(f"{path}: no activation peak in the summary")
    peaks.append(int(match.group(1)))
print("peaks:", " ".join(map(str, peaks)))
if all(a > b for a, b in zip(peaks, peaks[1:])):
    labels = [path.rsplit(".", 1)[-1] for path in sys.argv[1:]]
    print("activations decrease:", " > ".join(labels))
else:
    sys.exit("activations do not decrease")
