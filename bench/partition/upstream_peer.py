#!/usr/bin/env python3
"""Communicated bytes of Tessera's partitioner against upstream MLIR's.

Each case is one program twice: in Tessera's nn + dist dialects, and as the
equivalent linalg program with upstream `shard` annotations. Tessera runs
`--tessera-propagate --tessera-partition`; upstream runs
`builtin.module(func.func(sharding-propagation,shard-partition))`. For every
collective in the result we count the bytes of its local operand and the
bytes each device sends in a ring algorithm (the nccl-tests busbw factors:
all_reduce 2(n-1)/n of the buffer, reduce_scatter and all_to_all (n-1)/n of
the input, all_gather (n-1) times the input; all_slice sends nothing).

Run from the repository root after building:
    python3 bench/partition/upstream_peer.py [--tessera-opt build/bin/tessera-opt]
"""

import argparse
import re
import subprocess
import sys

DTYPE_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "f64": 8, "i64": 8, "i32": 4,
               "i1": 1}

CASES = {
    "megatron_mlp (tp=4)": (
        """
dist.mesh @m ["tp"=4]
func.func @f(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@m, [{}, {}]>},
             %w1: tensor<16x64xf32> {dist.sharding = #dist.sharding<@m, [{}, {"tp"}]>},
             %w2: tensor<64x16xf32> {dist.sharding = #dist.sharding<@m, [{"tp"}, {}]>})
    -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@m, [{}, {}]>}) {
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %y = nn.dot %h, %w2 contracting_dims = [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}""",
        """
shard.grid @grid(shape = 4)
func.func @f(%x: tensor<8x16xf32>, %w1: tensor<16x64xf32>, %w2: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %s1 = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %w1s = shard.shard %w1 to %s1 : tensor<16x64xf32>
  %s2 = shard.sharding @grid split_axes = [[0], []] : !shard.sharding
  %w2s = shard.shard %w2 to %s2 : tensor<64x16xf32>
  %c0 = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8x64xf32>
  %z1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %h = linalg.matmul ins(%x, %w1s : tensor<8x16xf32>, tensor<16x64xf32>) outs(%z1 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %z2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%h, %w2s : tensor<8x64xf32>, tensor<64x16xf32>) outs(%z2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %s3 = shard.sharding @grid split_axes = [[], []] : !shard.sharding
  %ys = shard.shard %y to %s3 : tensor<8x16xf32>
  return %ys : tensor<8x16xf32>
}"""),
    "data_parallel (dp=4)": (
        """
dist.mesh @m ["dp"=4]
func.func @f(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@m, [{"dp"}, {}]>},
             %w: tensor<16x64xf32> {dist.sharding = #dist.sharding<@m, [{}, {}]>})
    -> (tensor<8x64xf32> {dist.sharding = #dist.sharding<@m, [{"dp"}, {}]>}) {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}""",
        """
shard.grid @grid(shape = 4)
func.func @f(%x: tensor<8x16xf32>, %w: tensor<16x64xf32>) -> tensor<8x64xf32> {
  %s1 = shard.sharding @grid split_axes = [[0], []] : !shard.sharding
  %xs = shard.shard %x to %s1 : tensor<8x16xf32>
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x64xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %y = linalg.matmul ins(%xs, %w : tensor<8x16xf32>, tensor<16x64xf32>) outs(%z : tensor<8x64xf32>) -> tensor<8x64xf32>
  %ys = shard.shard %y to %s1 : tensor<8x64xf32>
  return %ys : tensor<8x64xf32>
}"""),
    "row_parallel_to_sequence_parallel (tp=4)": (
        """
dist.mesh @m ["tp"=4]
func.func @f(%x: tensor<8x64xf32> {dist.sharding = #dist.sharding<@m, [{}, {"tp"}]>},
             %w: tensor<64x16xf32> {dist.sharding = #dist.sharding<@m, [{"tp"}, {}]>})
    -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@m, [{"tp"}, {}]>}) {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}""",
        """
shard.grid @grid(shape = 4)
func.func @f(%x: tensor<8x64xf32>, %w: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %s1 = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s1 : tensor<8x64xf32>
  %s2 = shard.sharding @grid split_axes = [[0], []] : !shard.sharding
  %ws = shard.shard %w to %s2 : tensor<64x16xf32>
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%xs, %ws : tensor<8x64xf32>, tensor<64x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %ys = shard.shard %y to %s2 : tensor<8x16xf32>
  return %ys : tensor<8x16xf32>
}"""),
    "dp_x_tp_mlp (2x2)": (
        """
dist.mesh @m ["dp"=2, "tp"=2]
func.func @f(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@m, [{"dp"}, {}]>},
             %w1: tensor<16x64xf32> {dist.sharding = #dist.sharding<@m, [{}, {"tp"}]>},
             %w2: tensor<64x16xf32> {dist.sharding = #dist.sharding<@m, [{"tp"}, {}]>})
    -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@m, [{"dp"}, {}]>}) {
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %y = nn.dot %h, %w2 contracting_dims = [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}""",
        """
shard.grid @grid(shape = 2x2)
func.func @f(%x: tensor<8x16xf32>, %w1: tensor<16x64xf32>, %w2: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %sx = shard.sharding @grid split_axes = [[0], []] : !shard.sharding
  %xs = shard.shard %x to %sx : tensor<8x16xf32>
  %s1 = shard.sharding @grid split_axes = [[], [1]] : !shard.sharding
  %w1s = shard.shard %w1 to %s1 : tensor<16x64xf32>
  %s2 = shard.sharding @grid split_axes = [[1], []] : !shard.sharding
  %w2s = shard.shard %w2 to %s2 : tensor<64x16xf32>
  %c0 = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8x64xf32>
  %z1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %h = linalg.matmul ins(%xs, %w1s : tensor<8x16xf32>, tensor<16x64xf32>) outs(%z1 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %z2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%h, %w2s : tensor<8x64xf32>, tensor<64x16xf32>) outs(%z2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %ys = shard.shard %y to %sx : tensor<8x16xf32>
  return %ys : tensor<8x16xf32>
}"""),
}

COLLECTIVE = re.compile(
    r"(?:dist|shard)\.(all_reduce|all_gather|reduce_scatter|all_to_all|"
    r"all_slice|broadcast|collective_permute)\b.*?"
    r"(?:\[(?P<axes>[^\]]*)\]|grid_axes = \[(?P<gaxes>[^\]]*)\]).*?"
    r": tensor<(?P<type>[^>]*)>")
MESH = re.compile(r'dist\.mesh @\w+ \[(?P<axes>[^\]]*)\]')
GRID = re.compile(r"shard\.grid @\w+\(shape = (?P<shape>[\dx]+)\)")


def tensor_bytes(type_text):
    *dims, dtype = type_text.split("x")
    count = 1
    for dim in dims:
        count *= int(dim)
    return count * DTYPE_BYTES[dtype]


def group_size(line, axis_sizes):
    match = COLLECTIVE.search(line)
    if match.group("axes") is not None:
        names = [a.strip().strip('"') for a in match.group("axes").split(",")]
    else:
        names = [int(a) for a in match.group("gaxes").split(",")]
    size = 1
    for name in names:
        size *= axis_sizes[name]
    return size


def ring_bytes(kind, operand_bytes, n):
    if kind == "all_reduce":
        return 2 * (n - 1) * operand_bytes // n
    if kind in ("reduce_scatter", "all_to_all"):
        return (n - 1) * operand_bytes // n
    if kind == "all_gather":
        return (n - 1) * operand_bytes
    if kind == "all_slice":
        return 0
    return operand_bytes


def measure(text):
    axis_sizes = {}
    mesh = MESH.search(text)
    if mesh:
        for axis in mesh.group("axes").split(","):
            name, size = axis.strip().split("=")
            axis_sizes[name.strip('"')] = int(size)
    grid = GRID.search(text)
    if grid:
        for index, size in enumerate(grid.group("shape").split("x")):
            axis_sizes[index] = int(size)
    kinds, operand_total, ring_total = [], 0, 0
    for line in text.splitlines():
        match = COLLECTIVE.search(line)
        if not match:
            continue
        kind = match.group(1)
        operand = tensor_bytes(match.group("type"))
        n = group_size(line, axis_sizes)
        kinds.append(kind)
        if kind != "all_slice":
            operand_total += operand
        ring_total += ring_bytes(kind, operand, n)
    return kinds, operand_total, ring_total


def run(command, text):
    result = subprocess.run(command, input=text, capture_output=True,
                            text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{result.stderr}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessera-opt", default="build/bin/tessera-opt")
    parser.add_argument("--mlir-opt", default="/usr/lib/llvm-22/bin/mlir-opt")
    args = parser.parse_args()
    print(f"{'case':44} {'tessera':34} {'bytes':>6} {'ring':>6} | "
          f"{'upstream':34} {'bytes':>6} {'ring':>6}")
    for name, (tessera, upstream) in CASES.items():
        ours = measure(run([args.tessera_opt, "--tessera-propagate",
                            "--tessera-partition"], tessera))
        theirs = measure(run([args.mlir_opt, "--pass-pipeline=builtin.module("
                              "func.func(sharding-propagation,shard-partition))"],
                             upstream))
        print(f"{name:44} {','.join(ours[0]) or '-':34} {ours[1]:6} "
              f"{ours[2]:6} | {','.join(theirs[0]) or '-':34} {theirs[1]:6} "
              f"{theirs[2]:6}")
        if ours[2] > theirs[2]:
            print(f"  tessera sends more than upstream on {name}")


if __name__ == "__main__":
    main()
