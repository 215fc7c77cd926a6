#!/usr/bin/env python3
"""ONNX import time and peak memory against model size.

GPT-2-shaped decoders (test/e2e/Inputs/torch_models.py's GPT2: 124M and
350M parameters at GPT-2's shapes) are exported by torch.onnx.export and
saved with their weights as external data. Then `tessera import
--weights-out` runs under /usr/bin/time: wall time and peak resident memory,
next to the weights' bytes (the import should be linear in the model and
hold each weight once, not all of them). onnx.load of the same file, the
Python reference a user would otherwise reach for, runs beside it.

  /usr/bin/python3 bench/import/import_time.py [--sizes 124M,350M]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "e2e", "Inputs"))
import torch_models  # noqa: E402

BIN = os.path.join(HERE, "..", "..", "build", "bin")


def timed(command):
    """Wall seconds and peak resident MB of a command."""
    start = time.time()
    done = subprocess.run(["/usr/bin/time", "-v"] + command,
                          capture_output=True, text=True)
    wall = time.time() - start
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)",
                         done.stderr).group(1))
    return wall, peak / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="124M,350M")
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=50257)
    args = parser.parse_args()
    print(f"{'model':>6} {'params':>8} {'weights MB':>10} {'import s':>9} "
          f"{'peak MB':>8} {'peak/weights':>12} {'onnx.load s':>11} "
          f"{'peak MB':>8}")
    with tempfile.TemporaryDirectory() as scratch:
        for size in args.sizes.split(","):
            path = os.path.join(scratch, f"gpt2-{size}.onnx")
            parameters = torch_models.export_gpt2(path, size, args.seq,
                                                  args.vocab)
            weights_mb = os.path.getsize(path + ".weights") / 2**20
            wall, peak = timed([os.path.join(BIN, "tessera"), "import", path,
                                "-o", os.path.join(scratch, "model.mlir"),
                                "--weights-out",
                                os.path.join(scratch, "weights.tsrt")])
            load_wall, load_peak = timed(
                ["/usr/bin/python3", "-c",
                 f"import onnx; onnx.load({path!r})"])
            print(f"{size:>6} {parameters / 1e6:>7.1f}M {weights_mb:>10.0f} "
                  f"{wall:>9.2f} {peak:>8.0f} {peak / weights_mb:>12.2f} "
                  f"{load_wall:>11.2f} {load_peak:>8.0f}")
            for name in os.listdir(scratch):
                os.remove(os.path.join(scratch, name))


if __name__ == "__main__":
    main()
