#!/usr/bin/env python3
"""Bytes each device sends per step, two builds of Tessera side by side.

Every example trained with AdamW on several meshes (plain, ZeRO-1 and ZeRO-3)
and every partition pattern of test/e2e/patterns.test, compiled by both
builds; for each program the collectives' ring bytes are counted as
upstream_peer.py counts them (the nccl-tests bus bandwidth factors). Then GPTs
with heads, a vocab or a batch that their mesh axes do not divide, which
this build pads. The table shows the baseline's and this build's bytes and
flags any program that sends more than before.

Run from the repository root after building, with a baseline build (a copy
of bin/ from an earlier commit):
    python3 bench/partition/bytes_per_step.py --baseline /tmp/old
"""

import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from upstream_peer import measure  # noqa: E402

EXAMPLES = ["mlp.mlir", "mlp_megatron.mlir", "gpt_block.mlir",
            "gpt_small.mlir", "llama_small.mlir"]
MESHES = ["dp=2,tp=2", "dp=1,tp=4", "dp=4,tp=1", "dp=2,tp=4"]
ZERO = ["0", "1", "3"]


def run(command, stdin=None):
    result = subprocess.run(command, input=stdin, capture_output=True,
                            text=True, check=False)
    if result.returncode != 0:
        return None
    return result.stdout


def patterns(path):
    """The split-file parts of patterns.test: (name, text)."""
    parts, name, lines = [], None, []
    for line in open(path, encoding="utf-8"):
        match = re.match(r"//--- (\S+)", line)
        if match:
            if name:
                parts.append((name, "".join(lines)))
            name, lines = match.group(1), []
        elif name:
            lines.append(line)
    if name:
        parts.append((name, "".join(lines)))
    return parts


# GPTs with dims their mesh axes do not divide (--tessera-pad): model
# flags, the mesh, and whether the token table is split over "tp" (vocab
# parallel, by hand: the Megatron annotation keeps tables whole).
UNEVEN = [
    ("heads=25 tp=2", ["--hidden", "200", "--heads", "25"], "dp=1,tp=2", False),
    ("heads=25 dp=2,tp=2", ["--hidden", "200", "--heads", "25"], "dp=2,tp=2",
     False),
    ("vocab=50257 tp=8", ["--vocab", "50257"], "dp=1,tp=8", True),
    ("batch=6 dp=4", ["--batch", "6"], "dp=4,tp=1", False),
]


def uneven(builds):
    """Rows of the UNEVEN GPTs: before padding a split that did not divide
    was dropped (heads: attention whole on every device) or an error."""
    rows = []
    for name, flags, mesh, vocab_split in UNEVEN:
        model = ["--layers", "2", "--hidden", "64", "--heads", "4", "--seq",
                 "16", "--batch", "8", "--vocab", "256"]
        for i in range(0, len(flags), 2):
            model[model.index(flags[i]) + 1] = flags[i + 1]
        text = run([os.path.join(builds[1], "tessera"), "model", "gpt",
                    "--sharding", "megatron", "-o", "-"] + model)
        if vocab_split:
            text = re.sub(r'(%arg2: tensor<\d+x\d+xf32>) \{nn.param = "wte"\}',
                          r'\1 {dist.sharding = #dist.sharding<@mesh, '
                          r'[{"tp"}, {}]>, nn.param = "wte"}', text)
        command = ["compile", "-", "--mesh", mesh, "--train", "adamw",
                   "--emit", "partitioned", "-o", "-"]
        texts = [run([os.path.join(b, "tessera")] + command, text)
                 for b in builds]
        rows.append((f"gpt {name}", texts))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build/bin",
                        help="this build's bin directory")
    parser.add_argument("--baseline", required=True,
                        help="the baseline's bin directory (tessera, "
                        "tessera-opt)")
    args = parser.parse_args()
    builds = [args.baseline, args.build]

    rows = []
    for example in EXAMPLES:
        for mesh in MESHES:
            for zero in ZERO:
                command = ["compile", f"examples/{example}", "--mesh", mesh,
                           "--train", "adamw", "--zero", zero,
                           "--emit", "partitioned", "-o", "-"]
                texts = [run([os.path.join(b, "tessera")] + command)
                         for b in builds]
                rows.append((f"{example} {mesh} zero={zero}", texts))
    for name, text in patterns("test/e2e/patterns.test"):
        command = ["--tessera-propagate", "--tessera-partition"]
        texts = [run([os.path.join(b, "tessera-opt")] + command, text)
                 for b in builds]
        rows.append((f"pattern {name}", texts))

    rows += uneven(builds)

    print(f"{'program':44} {'before':>10} {'after':>10} {'after/before':>12}")
    worse = 0
    total = [0, 0]
    for name, texts in rows:
        if texts[1] is None:
            print(f"{name:44} {'(does not compile)':>34}")
            continue
        if texts[0] is None:
            # Only this build compiles it: not in the totals.
            print(f"{name:44} {'error':>10} {measure(texts[1])[2]:10}")
            continue
        before, after = (measure(text)[2] for text in texts)
        total[0] += before
        total[1] += after
        ratio = f"{after / before:.3f}" if before else "-"
        flag = "  MORE" if after > before else ""
        worse += after > before
        print(f"{name:44} {before:10} {after:10} {ratio:>12}{flag}")
    print(f"{'total':44} {total[0]:10} {total[1]:10} "
          f"{total[1] / total[0]:12.3f}")
    print(f"{worse} programs send more than before")


if __name__ == "__main__":
    main()
