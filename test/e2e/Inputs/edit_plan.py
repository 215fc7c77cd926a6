"""Edits a text plan (tessera compile --text) for loader tests and drops its
checksums, as a plan written by hand has none:
edit_plan.py IN OUT OLD NEW [COUNT]: replaces the first COUNT (default 1)
occurrences of OLD with NEW."""
import re
import sys

text = open(sys.argv[1]).read()
old, new = sys.argv[3], sys.argv[4]
count = int(sys.argv[5]) if len(sys.argv) > 5 else 1
if old not in text:
    sys.exit(f"'{old}' is not in the plan")
text = text.replace(old, new, count)
text = re.sub(r"^\s*checksum: \d+\n", "", text, flags=re.M)
open(sys.argv[2], "w").write(text)
