#!/usr/bin/env python3
"""Differential testing of propagation and partition on random programs.

Generates small random `nn` programs (chains and DAGs of elementwise ops,
dots, transposes, reshapes, concatenations, slices, softmaxes,
reductions, gathers and scatter-adds along either axis and top-k over
random shapes) with random
partial sharding annotations (splits that divide their dim and, padded,
splits that do not; on arguments, results, dist.sharding_constraint;
open and closed dims) on random 1-D, 2-D and 3-D meshes, and runs each
through `tessera verify`, which propagates, partitions and runs it on as
many MPI ranks as the mesh has devices against the single-device program.
A numeric mismatch, a crash or an error that is not one clear diagnostic is
a failure; the program is kept for a reproducer.

    python3 test/fuzz/random_programs.py --seed 0 --count 200 \\
        --tessera build/bin/tessera --keep /tmp/failures
"""

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile

MESHES = [
    [("x", 2)],
    [("x", 4)],
    [("x", 3)],
    [("x", 2), ("y", 2)],
    [("x", 2), ("y", 3)],
    [("x", 2), ("y", 4)],
    [("x", 2), ("y", 2), ("z", 2)],
]
UNARY = ["relu", "tanh", "neg", "exp", "sin"]
BINARY = ["add", "mul", "sub", "max", "min"]


class Program:
    def __init__(self, rng, mesh):
        self.rng = rng
        self.mesh = mesh
        self.lines = []
        self.values = []  # (name, shape)
        self.count = 0

    def fresh(self):
        self.count += 1
        return f"%v{self.count}"

    def sharding(self, shape, closed_only=False):
        """A random #dist.sharding body for `shape`: each mesh axis splits at
        most one dim, one it divides or, mostly, one it does not divide but
        each device gets some of (which partition pads); dims open or
        closed."""
        axes = [name for name, _ in self.mesh]
        self.rng.shuffle(axes)
        dims = [[] for _ in shape]
        pieces = list(shape)
        for name in axes:
            size = dict(self.mesh)[name]
            if self.rng.random() < 0.5:
                continue
            dim = self.rng.randrange(len(shape))
            if pieces[dim] % size == 0 or (pieces[dim] >= size and
                                           self.rng.random() < 0.8):
                dims[dim].append(name)
                pieces[dim] = -(-pieces[dim] // size)
        parts = []
        for dim in dims:
            open_ = not closed_only and self.rng.random() < 0.4
            inner = ", ".join(f'"{a}"' for a in dim)
            if open_:
                inner = inner + ", ?" if inner else "?"
            parts.append("{" + inner + "}")
        return "[" + ", ".join(parts) + "]"

    @staticmethod
    def type(shape):
        return "tensor<" + "x".join(str(s) for s in shape) + "xf32>"

    def pick(self, rank=None):
        candidates = [v for v in self.values
                      if rank is None or len(v[1]) == rank]
        return self.rng.choice(candidates) if candidates else None

    def add(self, text, shape):
        name = self.fresh()
        self.lines.append(f"  {name} = {text}")
        self.values.append((name, shape))
        return name, shape

    def step(self):
        rng = self.rng
        kind = rng.choice(["unary", "binary", "binary", "dot", "transpose",
                           "softmax", "constraint", "reduce", "reshape",
                           "concat", "slice", "clamp", "gather", "top_k"])
        value = self.pick(rank=2)
        if value is None:
            return
        name, shape = value
        t = self.type(shape)
        if kind == "unary":
            op = rng.choice(UNARY)
            self.add(f"nn.{op} {name} : {t}", shape)
        elif kind == "binary":
            other = [v for v in self.values if v[1] == shape]
            name2 = rng.choice(other)[0]
            op = rng.choice(BINARY)
            self.add(f"nn.{op} {name}, {name2} : {t}", shape)
        elif kind == "dot":
            other = [v for v in self.values
                     if len(v[1]) == 2 and v[1][0] == shape[1]]
            if not other:
                return
            name2, shape2 = rng.choice(other)
            out = [shape[0], shape2[1]]
            self.add(f"nn.dot {name}, {name2} contracting_dims = [1] x [0] : "
                     f"({t}, {self.type(shape2)}) -> {self.type(out)}", out)
        elif kind == "transpose":
            out = [shape[1], shape[0]]
            self.add(f"nn.transpose {name} permutation = [1, 0] : {t} -> "
                     f"{self.type(out)}", out)
        elif kind == "clamp":
            self.add(f"nn.clamp {name} min = -0.5 max = 0.75 : {t}", shape)
        elif kind == "gather":
            # Picks along one axis, then scatter-adds them back to the
            # value's shape, so chains go on.
            axis = rng.randrange(2)
            picked = list(shape)
            picked[axis] = rng.choice([2, 4])
            rows = [[rng.randrange(shape[axis]) for _ in range(picked[1])]
                    for _ in range(picked[0])]
            it = f"tensor<{picked[0]}x{picked[1]}xi64>"
            indices = self.fresh()
            self.lines.append(f"  {indices} = nn.constant dense<{rows}> : {it}")
            gathered, _ = self.add(
                f"nn.gather {name}, {indices} axis = {axis} : ({t}, {it}) -> "
                f"{self.type(picked)}", picked)
            self.values.pop()  # its shape is the gather's own
            self.add(f"nn.scatter_add {gathered}, {indices} axis = {axis} : "
                     f"({self.type(picked)}, {it}) -> {t}", shape)
        elif kind == "top_k":
            k = rng.choice([2, 4])
            if shape[1] < k:
                return
            out = [shape[0], k]
            values = self.fresh()
            self.lines.append(
                f"  {values}, {self.fresh()} = nn.top_k {name} k = {k} : {t} "
                f"-> ({self.type(out)}, tensor<{shape[0]}x{k}xi64>)")
            self.values.append((values, out))
        elif kind == "softmax":
            dim = rng.randrange(2)
            self.add(f"nn.softmax {name} dim = {dim} : {t}", shape)
        elif kind == "constraint":
            self.add(f"dist.sharding_constraint {name} <@mesh, "
                     f"{self.sharding(shape)}> : {t}", shape)
        elif kind == "reshape":
            # To another rank-2 shape of as many elements.
            total = shape[0] * shape[1]
            shapes = [[r, total // r] for r in (4, 8, 16, 32)
                      if total % r == 0 and total // r in (4, 8, 16, 32)
                      and [r, total // r] != shape]
            if not shapes:
                return
            out = rng.choice(shapes)
            self.add(f"nn.reshape {name} : {t} -> {self.type(out)}", out)
        elif kind == "concat":
            dim = rng.randrange(2)
            other = [v for v in self.values if len(v[1]) == 2 and
                     v[1][1 - dim] == shape[1 - dim] and
                     v[1][dim] + shape[dim] <= 32]
            if not other:
                return
            name2, shape2 = rng.choice(other)
            out = list(shape)
            out[dim] += shape2[dim]
            self.add(f"nn.concat {name}, {name2} dim = {dim} : {t}, "
                     f"{self.type(shape2)} -> {self.type(out)}", out)
        elif kind == "slice":
            # The first or the second half of a dim.
            dim = rng.randrange(2)
            if shape[dim] < 8:
                return
            half = shape[dim] // 2
            start, limit = [0, 0], list(shape)
            if rng.random() < 0.5:
                start[dim] = half
            else:
                limit[dim] = half
            out = list(shape)
            out[dim] = half
            self.add(f"nn.slice {name} start = {start} limit = {limit} : "
                     f"{t} -> {self.type(out)}", out)
        elif kind == "reduce":
            # Reduced back to rank 2 by a broadcast, so chains go on.
            dim = rng.randrange(2)
            kept = [shape[1 - dim]]
            op = rng.choice(["reduce_sum", "reduce_max", "reduce_mean"])
            reduced, _ = self.add(
                f"nn.{op} {name} dims = [{dim}] : {t} -> "
                f"{self.type(kept)}", kept)
            self.values.pop()  # rank 1: not an operand for the others
            self.add(f"nn.broadcast {reduced} dims = [{1 - dim}] : "
                     f"{self.type(kept)} -> {t}", shape)

    def build(self):
        rng = self.rng
        sizes = [6, 8, 10, 12, 16]
        args = []
        for i in range(rng.randint(1, 3)):
            shape = [rng.choice(sizes), rng.choice(sizes)]
            annotation = ""
            if rng.random() < 0.7:
                annotation = (" {dist.sharding = #dist.sharding<@mesh, "
                              f"{self.sharding(shape)}>}}")
            args.append(f"%a{i}: {self.type(shape)}{annotation}")
            self.values.append((f"%a{i}", shape))
        for _ in range(rng.randint(2, 8)):
            self.step()
        made = [v for v in self.values if v[0].startswith("%v")]
        if not made:
            self.add(f"nn.relu {self.values[0][0]} : "
                     f"{self.type(self.values[0][1])}", self.values[0][1])
            made = self.values[-1:]
        returned = [made[-1]] + ([rng.choice(made)]
                                 if rng.random() < 0.3 else [])
        results = []
        for _, shape in returned:
            annotation = ""
            if rng.random() < 0.4:
                annotation = (" {dist.sharding = #dist.sharding<@mesh, "
                              f"{self.sharding(shape)}>}}")
            results.append(self.type(shape) + annotation)
        mesh = ", ".join(f'"{n}"={s}' for n, s in self.mesh)
        text = [f"dist.mesh @mesh [{mesh}]",
                f"func.func @f({', '.join(args)}) -> "
                f"({', '.join(results)}) {{"]
        text += self.lines
        text.append("  return " + ", ".join(v[0] for v in returned) + " : " +
                    ", ".join(self.type(v[1]) for v in returned))
        text.append("}")
        return "\n".join(text) + "\n"


def classify(result):
    out = result.stdout + result.stderr
    if result.returncode == 0 and "verify: PASS" in out:
        return "pass", ""
    if re.search(r"LLVM ERROR|Assertion|Stack dump|Segmentation|signal|"
                 r"terminate called|core dumped", out):
        return "crash", out[-2000:]
    if "verify: FAIL" in out:
        return "mismatch", out[-2000:]
    if result.returncode == 124:
        return "hang", out[-2000:]
    # A plan the compiler made must run.
    if "a run failed" in out:
        return "run-failed", out[-2000:]
    # A diagnostic: one clear error naming the problem is fine; a module
    # dump after it, or an op's verifier failing on what a pass made of a
    # valid program, is not.
    errors = [line for line in out.splitlines() if "error: " in line]
    if errors and "module {" not in out and "' op " not in errors[0]:
        return "diagnostic", errors[0][:200]
    return "bad-error", out[-2000:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessera", default="build/bin/tessera")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("--keep", help="directory for failing programs")
    args = parser.parse_args()
    tally = {}
    failures = 0
    for case in range(args.count):
        rng = random.Random(args.seed * 100003 + case)
        program = Program(rng, rng.choice(MESHES)).build()
        with tempfile.NamedTemporaryFile("w", suffix=".mlir",
                                         delete=False) as f:
            f.write(program)
            path = f.name
        try:
            result = subprocess.run(
                [args.tessera, "verify", path, "--seed", str(case)],
                capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            result = subprocess.CompletedProcess([], 124, "", "timeout")
        kind, detail = classify(result)
        tally[kind] = tally.get(kind, 0) + 1
        if kind not in ("pass", "diagnostic"):
            failures += 1
            print(f"case {case}: {kind}\n{program}{detail}\n", flush=True)
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                with open(os.path.join(args.keep, f"case{case}.mlir"),
                          "w") as out:
                    out.write(program)
        elif kind == "diagnostic":
            print(f"case {case}: diagnostic: {detail}", flush=True)
        os.unlink(path)
    print("random programs: " +
          ", ".join(f"{n} {k}" for k, n in sorted(tally.items())))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
