#!/usr/bin/env python3
"""The memory `tessera plan` charges a plan of a model that is not a decoder
(per-op shardings, searchMeshShardings) against the compiled step's peak,
side by side, for each schedule and recomputation: an MLP whose activations
outweigh its state and, where PyTorch is installed, an imported 4-layer
PyTorch encoder.

Each row runs `tessera compile --auto` pinned to the plan (its predicted
memory per device), then compiles the annotated model it emits with the
plan's options and takes the largest rank's "memory at the peak".

Run from the repository root after building:
    python3 bench/search/mesh_memory.py
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

# dp, tp, pp, microbatches, schedule, recompute
MLP_PLANS = [
    (1, 1, 1, 1, "1f1b", "none"),
    (1, 1, 1, 1, "1f1b", "full"),
    (1, 1, 1, 4, "1f1b", "full"),
    (1, 2, 2, 2, "1f1b", "none"),
    (1, 2, 2, 2, "gpipe", "none"),
    (1, 2, 2, 4, "zb-h1", "none"),
    (2, 1, 2, 4, "zb-h1", "full"),
    (1, 1, 4, 4, "interleaved", "none"),
    (1, 1, 4, 8, "interleaved", "full"),
]
ENCODER_PLANS = [
    (1, 1, 1, 1, "1f1b", "none"),
    (1, 1, 1, 1, "1f1b", "selective"),
    (1, 1, 1, 1, "1f1b", "full"),
    (1, 2, 1, 1, "1f1b", "selective"),
    (1, 1, 2, 1, "gpipe", "selective"),
    (1, 1, 4, 1, "1f1b", "full"),
    (1, 1, 4, 1, "zb-h1", "none"),
]

ENCODER = """
import torch, torch.nn as nn
torch.manual_seed(0)
class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(
            64, 4, 128, dropout=0.0, activation="gelu", batch_first=True)
            for _ in range(4)])
    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
model = Encoder()
model.train()
torch.onnx.export(model, (torch.randn(16, 128, 64),), "{path}",
                  opset_version=17, do_constant_folding=False,
                  training=torch.onnx.TrainingMode.PRESERVE)
"""


def compare(tessera, model, machine, plan, scratch):
    dp, tp, pp, mb, schedule, recompute = plan
    annotated = os.path.join(scratch, "annotated.mlir")
    auto = subprocess.run(
        [tessera, "compile", model, "--auto", "--machine", machine,
         "--devices", str(dp * tp * pp), "--train", "adamw", "--mesh",
         f"dp={dp},tp={tp}", "--pp", str(pp), "--microbatches", str(mb),
         "--schedule", schedule, "--recompute", recompute, "--emit", "nn",
         "-o", annotated], capture_output=True, text=True, check=True).stderr
    planned = float(re.search(r"([0-9.]+) MB per device", auto).group(1))
    out = subprocess.run(
        [tessera, "compile", annotated, "--train", "adamw", "--pp", str(pp),
         "--microbatches", str(mb), "--schedule", schedule, "--virtual",
         "2" if schedule == "interleaved" else "1", "--recompute", recompute,
         "-o", os.path.join(scratch, "step.plan")],
        capture_output=True, text=True, check=True).stdout
    compiled = max(sum(int(x) for x in re.findall(r"(\d+)", line))
                   for line in out.splitlines()
                   if line.startswith("memory at the peak")) / 1e6
    return planned, compiled


def report(name, tessera, model, machine, plans, scratch):
    for plan in plans:
        planned, compiled = compare(tessera, model, machine, plan, scratch)
        dp, tp, pp, mb, schedule, recompute = plan
        print(f"{name:>7} {dp:2} {tp:2} {pp:2} {mb:2} {schedule:>11} "
              f"{recompute:>9} {planned:8.1f} {compiled:8.1f} "
              f"{100 * (planned / compiled - 1):+6.1f}%")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessera", default="build/bin/tessera")
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="a Python with torch and onnx, for the encoder")
    args = parser.parse_args()
    print(f"{'model':>7} {'dp':>2} {'tp':>2} {'pp':>2} {'mb':>2} "
          f"{'schedule':>11} {'recompute':>9} {'planned':>8} {'peak MB':>8} "
          f"{'error':>7}")
    with tempfile.TemporaryDirectory() as scratch:
        mlp = os.path.join(scratch, "mlp.mlir")
        subprocess.run(
            [args.tessera, "model", "mlp", "--layers", "8", "--input", "256",
             "--hidden", "256", "--output", "256", "--batch", "2048", "-o",
             mlp], check=True, capture_output=True)
        report("mlp", args.tessera, mlp, "test/e2e/Inputs/slow-network.json",
               MLP_PLANS, scratch)
        onnx = os.path.join(scratch, "encoder.onnx")
        exported = subprocess.run(
            [args.python, "-c", ENCODER.format(path=onnx)],
            capture_output=True, text=True)
        if exported.returncode != 0:
            print("encoder: skipped (no torch and onnx in " + args.python +
                  ")", file=sys.stderr)
            return
        encoder = os.path.join(scratch, "encoder.mlir")
        subprocess.run(
            [args.tessera, "import", onnx, "--loss", "cross-entropy", "-o",
             encoder], check=True, capture_output=True)
        report("encoder", args.tessera, encoder, "dgx-h100", ENCODER_PLANS,
               scratch)


if __name__ == "__main__":
    main()
