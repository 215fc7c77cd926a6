"""Writes a safetensors file of deterministic tensors without Tessera, with
the standard library only, to check Tessera's reader against the published
format: write_safetensors.py OUT NAME=DTYPE:SHAPE:SEED ... [--dump NAME]
[--like FILE --as DTYPE].

SHAPE is "2x3" ("" for a scalar). Element i of a tensor with seed s comes
from k = i*7919 + s*104729: k % 1000 / 1000 - 0.5 for floats (bf16 rounded
to nearest even from f32), k % 256 - 128 for signed integers, k % 256 for
U8 and k % 2 for BOOL. With --dump NAME, prints NAME's stored values, one a
line, and nothing else. With --like FILE, the file also holds a tensor of
each name and shape FILE's header gives, in --as's dtype (seeded by their
order)."""
import argparse
import json
import struct

FORMATS = {"F64": "d", "F32": "f", "F16": "e", "BF16": "H", "I64": "q",
           "I32": "i", "I16": "h", "I8": "b", "U8": "B", "BOOL": "?"}


def value(dtype, k):
    if dtype == "BOOL":
        return k % 2 == 1
    if dtype == "U8":
        return k % 256
    if dtype.startswith("I"):
        return k % 256 - 128
    x = k % 1000 / 1000 - 0.5
    if dtype == "BF16":
        bits = struct.unpack("<I", struct.pack("<f", x))[0]
        return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return x


def stored(dtype, raw):
    """The value a reader gets back from an element's bytes."""
    if dtype == "BF16":
        return struct.unpack("<f", struct.pack("<I", raw << 16))[0]
    return struct.unpack("<" + FORMATS[dtype],
                         struct.pack("<" + FORMATS[dtype], raw))[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("tensors", nargs="*", metavar="NAME=DTYPE:SHAPE:SEED")
    parser.add_argument("--dump", metavar="NAME")
    parser.add_argument("--like", metavar="FILE")
    parser.add_argument("--as", dest="dtype", default="F32")
    args = parser.parse_args()
    if args.like:
        with open(args.like, "rb") as like:
            size = struct.unpack("<Q", like.read(8))[0]
            header = json.loads(like.read(size))
        header.pop("__metadata__", None)
        args.tensors = [f"{name}={args.dtype}:"
                        + "x".join(str(d) for d in header[name]["shape"])
                        + f":{seed}"
                        for seed, name in enumerate(sorted(header))] + args.tensors

    tensors = {}
    for spec in args.tensors:
        name, _, rest = spec.partition("=")
        dtype, shape, seed = rest.split(":")
        if dtype not in FORMATS:
            parser.error(f"unknown dtype '{dtype}' in '{spec}'")
        shape = [int(size) for size in shape.split("x")] if shape else []
        count = 1
        for size in shape:
            count *= size
        values = [value(dtype, i * 7919 + int(seed) * 104729)
                  for i in range(count)]
        data = struct.pack(f"<{count}{FORMATS[dtype]}", *values)
        tensors[name] = (dtype, shape, values, data)

    if args.dump and args.dump not in tensors:
        parser.error(f"--dump names no tensor: '{args.dump}'")

    # As the reference writer does: larger elements first, so that every
    # tensor is aligned to its elements; the header pads to 8 bytes.
    order = sorted(tensors, key=lambda n: -struct.calcsize(
        FORMATS[tensors[n][0]]))
    header, offset = {}, 0
    for name in order:
        dtype, shape, _, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps({name: header[name] for name in tensors},
                      separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(args.out, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text)
        for name in order:
            out.write(tensors[name][3])

    if args.dump:
        dtype, _, values, _ = tensors[args.dump]
        for raw in values:
            print(int(raw) if dtype == "BOOL" else stored(dtype, raw))


if __name__ == "__main__":
    main()
