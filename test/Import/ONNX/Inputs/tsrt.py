"""Tessera's tensor files (runtime/include/tessera/runtime/Dump.h) as numpy.

Layout: "TSRT", u32 version 1, u64 count, then per tensor u32 dtype, u32
rank, i64 dims[rank] and the raw little-endian elements.
"""
import struct

import numpy as np

# runtime::DType, in order.
DTYPES = [np.float32, np.float64, np.float16, "bfloat16", np.int32, np.int64,
          np.bool_]


class BFloat16:
    """A bfloat16 tensor given by its bits (numpy has no bfloat16)."""

    def __init__(self, bits):
        self.bits = np.asarray(bits, dtype=np.uint16)

    def to_float32(self):
        return (self.bits.astype(np.uint32) << 16).view(np.float32)


def _code(array):
    for code, dtype in enumerate(DTYPES):
        if dtype != "bfloat16" and array.dtype == np.dtype(dtype):
            return code
    raise ValueError(f"no tensor-file dtype for {array.dtype}")


def write(path, arrays):
    with open(path, "wb") as out:
        out.write(b"TSRT" + struct.pack("<IQ", 1, len(arrays)))
        for array in arrays:
            if isinstance(array, BFloat16):
                code, array = DTYPES.index("bfloat16"), array.bits
            else:
                code = _code(array)
            # (np.ascontiguousarray would make a scalar 1-D.)
            array = np.array(array, order="C")
            out.write(struct.pack("<II", code, array.ndim))
            out.write(struct.pack(f"<{array.ndim}q", *array.shape))
            out.write(array.astype(array.dtype.newbyteorder("<")).tobytes())


def read(path):
    with open(path, "rb") as file:
        data = file.read()
    if data[:4] != b"TSRT":
        raise ValueError(f"{path} is not a tensor file")
    _, count = struct.unpack_from("<IQ", data, 4)
    offset, arrays = 16, []
    for _ in range(count):
        code, rank = struct.unpack_from("<II", data, offset)
        offset += 8
        shape = struct.unpack_from(f"<{rank}q", data, offset)
        offset += 8 * rank
        size = int(np.prod(shape)) if rank else 1
        if DTYPES[code] == "bfloat16":
            bits = np.frombuffer(data, "<u2", size, offset)
            array = (bits.astype(np.uint32) << 16).view(np.float32)
            offset += 2 * size
        else:
            dtype = np.dtype(DTYPES[code]).newbyteorder("<")
            array = np.frombuffer(data, dtype, size, offset)
            offset += dtype.itemsize * size
        arrays.append(array.reshape(shape))
    return arrays
