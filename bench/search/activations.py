#!/usr/bin/env python3
"""The activation memory `tessera plan` charges a plan against the compiled
train step's activation peak, side by side, for each recomputation mode with
and without tensor and sequence parallelism.

Per layer (the peak's growth from L to 2L layers) the two agree exactly: the
search counts the tensors the compiled backward keeps. The whole peak adds
the backward's transient, the larger of the LM head's and the first layer's
MLP's, which the search prices as measured (within 1% on these 30 plans).

Run from the repository root after building:
    python3 bench/search/activations.py
"""

import argparse
import json
import re
import subprocess
import tempfile


def compiled(tessera, model, tp, recompute):
    with tempfile.NamedTemporaryFile(suffix=".plan") as plan:
        out = subprocess.run(
            [tessera, "compile", model, "--mesh", f"dp=1,tp={tp}", "--train",
             "adamw", "--recompute", recompute, "-o", plan.name],
            capture_output=True, text=True, check=True).stdout
    return int(re.search(r"each at its own peak: .*activations (\d+)",
                         out).group(1))


def planned(tessera, model, tp, recompute, sp):
    out = subprocess.run(
        [tessera, "plan", model, "--machine", "dgx-h100", "--devices",
         str(tp), "--dp", "1", "--tp", str(tp), "--pp", "1",
         "--microbatches", "1", "--zero", "0", "--recompute", recompute,
         "--sequence-parallel", "on" if sp else "off", "--precision", "fp32",
         "--json", "--top", "1"], capture_output=True, text=True,
        check=True).stdout
    return json.loads(out)["plans"][0]["activation_bytes"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessera", default="build/bin/tessera")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--attention", choices=["fused", "unfused"],
                        default="fused")
    args = parser.parse_args()
    shapes = [(256, 4, 512, 4), (512, 8, 256, 2)]
    print(f"{'h':>4} {'s':>4} {'tp':>2} {'sp':>3} {'recompute':>9} "
          f"{'layer MB':>9} {'planned':>8} {'peak MB':>8} {'planned':>8} "
          f"{'error':>6}")
    for h, a, s, b in shapes:
        for sp in (False, True):
            for tp in ((2, 4) if sp else (1, 2, 4)):
                peaks = {}
                for layers in (args.layers, 2 * args.layers):
                    with tempfile.NamedTemporaryFile(suffix=".mlir") as model:
                        subprocess.run(
                            [args.tessera, "model", "gpt", "--layers",
                             str(layers), "--hidden", str(h), "--heads",
                             str(a), "--seq", str(s), "--vocab", "512",
                             "--batch", str(b), "--sharding",
                             "megatron-sp" if sp else "megatron",
                             "--attention", args.attention, "-o",
                             model.name], check=True, capture_output=True)
                        for recompute in ("none", "selective", "full"):
                            peaks[layers, recompute] = (
                                compiled(args.tessera, model.name, tp,
                                         recompute),
                                planned(args.tessera, model.name, tp,
                                        recompute, sp))
                for recompute in ("none", "selective", "full"):
                    (c1, p1) = peaks[args.layers, recompute]
                    (c2, p2) = peaks[2 * args.layers, recompute]
                    layer_c = (c2 - c1) / args.layers / 1e6
                    layer_p = (p2 - p1) / args.layers / 1e6
                    print(f"{h:4} {s:4} {tp:2} {'on' if sp else 'off':>3} "
                          f"{recompute:>9} {layer_c:9.2f} {layer_p:8.2f} "
                          f"{c2 / 1e6:8.1f} {p2 / 1e6:8.1f} "
                          f"{100 * (p2 - c2) / c2:+5.1f}%")


if __name__ == "__main__":
    main()
