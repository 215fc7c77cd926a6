#!/usr/bin/env python3
"""Propagation and partition time of the GPT-3 175B forward graph on 3-D meshes.

GSPMD's compile time does not depend on the device count; neither should
Tessera's. For each mesh ["dp", "sp", "tp"] from 8 to 8192 devices this
generates GPT-3 (L=96, h=12288, A=96, s=2048, V=51200, bf16) with the batch
split over "dp", the sequence over "sp" and Megatron tensor parallelism over
"tp" (q/k/v and the first MLP weight by columns, the output projections by
rows), then times `tessera-opt --tessera-propagate --tessera-pad
--tessera-partition` with -mlir-timing.

Run from the repository root after building:
    python3 bench/partition/compile_time.py
"""

import argparse
import re
import subprocess

MESHES = [(2, 2, 2), (4, 2, 8), (8, 8, 8), (32, 4, 8), (64, 8, 8), (64, 16, 8)]

COLUMN = ("attn.wq", "attn.wk", "attn.wv", "mlp.w1")
COLUMN_BIAS = ("attn.bq", "attn.bk", "attn.bv", "mlp.b1")
ROW = ("attn.wo", "mlp.w2")


def annotate(text, dp, sp, tp):
    def sharding(dims):
        return "#dist.sharding<@mesh, [" + ", ".join(dims) + "]>"

    def param(match):
        name = match.group(1)
        dims = None
        if name.endswith(COLUMN):
            dims = ["{}", '{"tp"}']
        elif name.endswith(COLUMN_BIAS):
            dims = ['{"tp"}']
        elif name.endswith(ROW):
            dims = ['{"tp"}', "{}"]
        if dims is None:
            return match.group(0)
        return f'{{dist.sharding = {sharding(dims)}, nn.param = "{name}"}}'

    text = re.sub(r'\{nn.param = "([^"]+)"\}', param, text)
    # The tokens and labels: batch over dp, sequence over sp.
    data_dims = ['{"dp"}', '{"sp"}']
    data = "{dist.sharding = " + sharding(data_dims) + "}"
    text = re.sub(r"(%arg[01]: tensor<\d+x\d+xi32>)", r"\1 " + data, text, count=2)
    mesh = f'dist.mesh @mesh ["dp"={dp}, "sp"={sp}, "tp"={tp}]\n'
    return text.replace("module {\n", "module {\n" + mesh, 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessera", default="build/bin/tessera")
    parser.add_argument("--tessera-opt", default="build/bin/tessera-opt")
    parser.add_argument("--layers", type=int, default=96)
    args = parser.parse_args()
    print(f"{'devices':>8} {'mesh dp x sp x tp':>18} {'propagate s':>12} "
          f"{'pad s':>8} {'partition s':>12} {'collectives':>12}")
    for dp, sp, tp in MESHES:
        model = subprocess.run(
            [args.tessera, "model", "gpt", "--layers", str(args.layers),
             "--hidden", "12288", "--heads", "96", "--seq", "2048",
             "--vocab", "51200", "--batch", str(dp), "--dtype", "bf16"],
            capture_output=True, text=True, check=True).stdout
        result = subprocess.run(
            [args.tessera_opt, "--tessera-propagate", "--tessera-pad",
             "--tessera-partition", "-mlir-timing",
             "-mlir-timing-display=list"],
            input=annotate(model, dp, sp, tp), capture_output=True, text=True,
            check=True)
        times = {}
        for line in result.stderr.splitlines():
            match = re.match(r"\s*([\d.]+)\s+\(\s*[\d.]+%\)\s+(\S+)", line)
            if match:
                times[match.group(2)] = float(match.group(1))
        collectives = len(re.findall(r"= dist\.", result.stdout))
        print(f"{dp * sp * tp:8} {f'{dp} x {sp} x {tp}':>18} "
              f"{times.get('PropagatePass', float('nan')):12.3f} "
              f"{times.get('PadPass', float('nan')):8.3f} "
              f"{times.get('PartitionPass', float('nan')):12.3f} "
              f"{collectives:12}")


if __name__ == "__main__":
    main()
