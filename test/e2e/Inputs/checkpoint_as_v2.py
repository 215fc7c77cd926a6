"""Rewrites the v3 checkpoint in a directory as the v2 that a release before
v3 saved: checkpoint_as_v2.py DIR. Its index.txt keeps its first three lines
(format, step, mesh), relabelled v2, without the rank lines and the checksum
that v3 added; each rank-<N>.txt's header is relabelled. The tensors files
and their checksums are v2's already."""
import glob
import os
import sys

directory = sys.argv[1]
index = os.path.join(directory, "index.txt")
lines = open(index).read().split("\n")
if lines[0] != "tessera checkpoint v3":
    sys.exit(f"{index}: expected a v3 checkpoint index, got '{lines[0]}'")
with open(index, "w") as file:
    file.write("\n".join(["tessera checkpoint v2"] + lines[1:3]) + "\n")
header = "tessera checkpoint shard v3\n"
for path in sorted(glob.glob(os.path.join(directory, "rank-*.txt"))):
    text = open(path).read()
    if not text.startswith(header):
        sys.exit(f"{path}: expected a v3 shard index")
    with open(path, "w") as file:
        file.write("tessera checkpoint shard v2\n" + text[len(header):])
