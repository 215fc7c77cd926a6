"""compare_safetensors.py A B: the two files hold the same tensors (names,
dtypes, shapes), each within 1e-2 of the other in relative L2 norm (AdamW
moves an element with a near-zero gradient by a step of its sign, so two
runs that round apart differ there); read with the standard library
only."""
import json
import struct
import sys

FORMATS = {"F64": "d", "F32": "f", "I64": "q", "I32": "i"}


def read(path):
    with open(path, "rb") as file:
        size = struct.unpack("<Q", file.read(8))[0]
        header = json.loads(file.read(size))
        data = file.read()
    header.pop("__metadata__", None)
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        code = FORMATS[entry["dtype"]]
        count = (end - begin) // struct.calcsize(code)
        tensors[name] = (entry["dtype"], entry["shape"],
                         struct.unpack(f"<{count}{code}", data[begin:end]))
    return tensors


a, b = read(sys.argv[1]), read(sys.argv[2])
if sorted(a) != sorted(b):
    sys.exit(f"names differ: {sorted(set(a) ^ set(b))}")
for name in a:
    (dtype, shape, x), (dtype2, shape2, y) = a[name], b[name]
    if (dtype, shape) != (dtype2, shape2):
        sys.exit(f"{name}: {dtype} {shape} against {dtype2} {shape2}")
    difference = sum((u - v) ** 2 for u, v in zip(x, y)) ** 0.5
    size = sum(u * u for u in x) ** 0.5
    if difference > 1e-2 * size + 1e-12:
        sys.exit(f"{name}: differs by {difference} (norm {size})")
print(f"{len(a)} tensors match")
