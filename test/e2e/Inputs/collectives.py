#!/usr/bin/env python3
"""The collectives of two partitioned programs (tessera compile --emit
partitioned), side by side: per kind and mesh axes, how many and the bytes
they move per device (an all-reduce's or all-to-all's buffer, an
all-gather's output, a reduce-scatter's input, a pipeline send's tensor).

  collectives.py A.mlir B.mlir

Prints one row per kind and axes, then "same collectives" when the bytes
of every row are equal, or the rows that differ.
"""
import collections
import re
import sys

COLLECTIVE = re.compile(
    r"dist\.(all_reduce|all_gather|reduce_scatter|all_to_all|send)\s.*?"
    r"on @\w+ (\[[^\]]*\]|\"\w+\").*?:\s*(tensor<[^>]*>)"
    r"(?:\s*->\s*(tensor<[^>]*>))?")
BYTES = {"f32": 4, "bf16": 2, "f16": 2, "f64": 8, "i32": 4, "i64": 8}


def tensor_bytes(text):
    *dims, element = text[len("tensor<"):-1].split("x")
    count = 1
    for dim in dims:
        count *= int(dim)
    return count * BYTES[element]


def collectives(path):
    table = collections.defaultdict(lambda: [0, 0])
    with open(path) as file:
        for line in file:
            match = COLLECTIVE.search(line)
            if not match:
                continue
            kind, axes, operand, result = match.groups()
            moved = result if kind == "all_gather" else operand
            row = table[(kind, axes)]
            row[0] += 1
            row[1] += tensor_bytes(moved)
    return table


def main():
    a, b = collectives(sys.argv[1]), collectives(sys.argv[2])
    print(f"{'collective':<16} {'axes':<12} {'count':>6} {'bytes':>10} "
          f"{'count':>6} {'bytes':>10}")
    differ = []
    for key in sorted(set(a) | set(b)):
        (ca, ba), (cb, bb) = a.get(key, [0, 0]), b.get(key, [0, 0])
        print(f"{key[0]:<16} {key[1]:<12} {ca:>6} {ba:>10} {cb:>6} {bb:>10}")
        if ba != bb:
            differ.append(f"{key[0]} on {key[1]}")
    print("same collectives" if not differ else
          "different collectives: " + ", ".join(differ))


if __name__ == "__main__":
    main()
