#!/usr/bin/env python3
"""Small ONNX models for the importer's lit tests: make_model.py NAME OUT.

Each is built with onnx.helper the way exporters write the pattern it
tests (PyTorch's shape subgraphs, a Gemm with transB, an embedding lookup),
or broken in one way for a negative test.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(nodes, inputs, outputs, initializers=(), opset=17, check=True,
          domains=()):
    graph = helper.make_graph(nodes, "test", inputs, outputs,
                              list(initializers))
    made = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)] +
        [helper.make_opsetid(domain, 1) for domain in domains])
    if check:
        onnx.checker.check_model(made)
    return made


def tensor(name, shape, seed=0):
    values = np.random.default_rng(seed).standard_normal(shape)
    return numpy_helper.from_array(values.astype(np.float32), name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def value(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def mlp():
    """torch.nn.Linear as PyTorch exports it: Gemm with transB."""
    return model(
        [helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"],
                          transB=1),
         helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["y"],
                          transB=1)],
        [value("x", F, [4, 16])], [value("y", F, [4, 8])],
        [tensor("fc1.weight", [32, 16]), tensor("fc1.bias", [32]),
         tensor("fc2.weight", [8, 32]), tensor("fc2.bias", [8])])


def shape_subgraph():
    """x.view(x.size(0), x.size(1), 4, -1): Shape, Gather, Unsqueeze,
    Concat, Reshape, all folded."""
    return model(
        [helper.make_node("Shape", ["x"], ["shape"]),
         helper.make_node("Gather", ["shape", "zero"], ["b"], axis=0),
         helper.make_node("Gather", ["shape", "one"], ["s"], axis=0),
         helper.make_node("Unsqueeze", ["b", "axes"], ["b1"]),
         helper.make_node("Unsqueeze", ["s", "axes"], ["s1"]),
         helper.make_node("Concat", ["b1", "s1", "heads"], ["target"],
                          axis=0),
         helper.make_node("Reshape", ["x", "target"], ["y"])],
        [value("x", F, [2, 8, 64])], [value("y", F, [2, 8, 4, 16])],
        [ints("zero", 0), ints("one", 1), ints("axes", [0]),
         ints("heads", [4, -1])])


def matmul():
    """A projection ([b, s, h] x [h, f]) and attention scores (batched)."""
    return model(
        [helper.make_node("MatMul", ["x", "w"], ["p"]),
         helper.make_node("MatMul", ["q", "k"], ["scores"])],
        [value("x", F, [2, 8, 16]), value("q", F, [2, 4, 8, 16]),
         value("k", F, [2, 4, 16, 8])],
        [value("p", F, [2, 8, 32]), value("scores", F, [2, 4, 8, 8])],
        [tensor("w", [16, 32])])


def embedding():
    """nn.Embedding: Gather of int64 ids from a [vocab, h] initializer, and
    a positional table sliced to the sequence."""
    return model(
        [helper.make_node("Gather", ["wte", "ids"], ["tokens"]),
         helper.make_node("Slice", ["wpe", "start", "end"], ["positions"]),
         helper.make_node("Add", ["tokens", "positions"], ["y"])],
        [value("ids", I64, [2, 8])], [value("y", F, [2, 8, 16])],
        [tensor("wte", [64, 16]), tensor("wpe", [32, 16]), ints("start", [0]),
         ints("end", [8])])


def rope_tables():
    """Rotary tables computed in the graph (Range, Unsqueeze, Mul, Sin,
    Cos): folded to constants, then applied to x."""
    return model(
        [helper.make_node("Range", ["r0", "r8", "r1"], ["positions"]),
         helper.make_node("Cast", ["positions"], ["p"], to=F),
         helper.make_node("Unsqueeze", ["p", "axes"], ["column"]),
         helper.make_node("Mul", ["column", "frequencies"], ["angles"]),
         helper.make_node("Cos", ["angles"], ["cos"]),
         helper.make_node("Sin", ["angles"], ["sin"]),
         helper.make_node("Mul", ["x", "cos"], ["xc"]),
         helper.make_node("Mul", ["x", "sin"], ["xs"]),
         helper.make_node("Sub", ["xc", "xs"], ["y"])],
        [value("x", F, [2, 8, 4])], [value("y", F, [2, 8, 4])],
        [ints("r0", 0), ints("r8", 8), ints("r1", 1), ints("axes", [1]),
         numpy_helper.from_array(
             np.array([1.0, 0.1, 0.01, 0.001], np.float32), "frequencies")])


def fused_qkv(sizes=(16, 16, 16)):
    """q, k and v from one weight, as torch.nn.Linear(h, 3h) and split(h)
    export: Transpose of the [3h, h] weight, MatMul, Add of the bias, Split
    in three."""
    width = sum(sizes)
    return model(
        [helper.make_node("Constant", [], ["sizes"],
                          value=ints("sizes", list(sizes))),
         helper.make_node("Transpose", ["qkv.weight"], ["wt"], perm=[1, 0]),
         helper.make_node("MatMul", ["x", "wt"], ["proj"]),
         helper.make_node("Add", ["proj", "qkv.bias"], ["biased"]),
         helper.make_node("Split", ["biased", "sizes"], ["q", "k", "v"],
                          axis=-1),
         helper.make_node("Mul", ["q", "k"], ["qk"]),
         helper.make_node("Concat", ["qk", "v"], ["y"], axis=-1)],
        [value("x", F, [2, 8, 16])],
        [value("y", F, [2, 8, sizes[0] + sizes[2]])],
        [tensor("qkv.weight", [width, 16]), tensor("qkv.bias", [width], 1)])


def uneven_qkv():
    """A split in parts of different widths: the weight stays as it is."""
    return fused_qkv((8, 8, 16))


def computed_trig():
    """Sin, Cos and Erf of values computed from the input and a weight: nn
    ops, and the weight stays a parameter."""
    return model(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("Sin", ["h"], ["s"]),
         helper.make_node("Cos", ["s"], ["c"]),
         helper.make_node("Erf", ["c"], ["y"])],
        [value("x", F, [2, 4])], [value("y", F, [2, 4])], [tensor("w", [4, 4])])


def rms_norm():
    """RMSNorm as PyTorch writes it out: Pow, ReduceMean, Add, Sqrt, Div."""
    return model(
        [helper.make_node("Pow", ["x", "two"], ["squares"]),
         helper.make_node("ReduceMean", ["squares"], ["mean"], axes=[-1]),
         helper.make_node("Add", ["mean", "eps"], ["shifted"]),
         helper.make_node("Sqrt", ["shifted"], ["root"]),
         helper.make_node("Div", ["x", "root"], ["normed"]),
         helper.make_node("Mul", ["normed", "weight"], ["y"])],
        [value("x", F, [2, 8, 16])], [value("y", F, [2, 8, 16])],
        [numpy_helper.from_array(np.array(2, np.float32), "two"),
         numpy_helper.from_array(np.array(1e-6, np.float32), "eps"),
         tensor("weight", [16])])


def layer_norm():
    return model(
        [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["y"],
                          epsilon=1e-5)],
        [value("x", F, [2, 8, 16])], [value("y", F, [2, 8, 16])],
        [tensor("gamma", [16]), tensor("beta", [16])])


def layer_norm_bad_axis():
    """LayerNormalization over axis -5 of a rank-3 input, with its mean
    output: libonnx 1.12's inference would write outside the shape."""
    return model(
        [helper.make_node("LayerNormalization", ["x", "gamma", "beta"],
                          ["y", "mean"], axis=-5, name="norm")],
        [value("x", F, [2, 8, 16])],
        [value("y", F, [2, 8, 16]), value("mean", F, [2, 8, 1])],
        [tensor("gamma", [16]), tensor("beta", [16])])


def dynamic():
    """A batch dim left symbolic, as exports with dynamic_axes write."""
    return model([helper.make_node("Relu", ["x"], ["y"])],
                 [value("x", F, ["batch", 16])], [value("y", F, ["batch", 16])])


def unsupported():
    """Ops Tessera does not import: Floor and Ceil of an input (they fold
    only), a foreign domain."""
    return model(
        [helper.make_node("Floor", ["x"], ["a"], name="quant/floor"),
         helper.make_node("Ceil", ["a"], ["b"], name="quant/ceil"),
         helper.make_node("Ceil", ["b"], ["c"], name="quant/ceil2"),
         helper.make_node("FusedGelu", ["c"], ["y"], name="fused",
                          domain="com.microsoft")],
        [value("x", F, [4])], [value("y", F, [4])], domains=["com.microsoft"])


def old_opset():
    return model([helper.make_node("Relu", ["x"], ["y"])],
                 [value("x", F, [4])], [value("y", F, [4])], opset=11)


def type_mismatch():
    """Add of a float and an int64 input."""
    return model([helper.make_node("Add", ["x", "n"], ["y"])],
                 [value("x", F, [4]), value("n", I64, [4])],
                 [value("y", F, [4])], check=False)


def cycle():
    """A node that reads its own output."""
    return model([helper.make_node("Add", ["x", "y"], ["y"])],
                 [value("x", F, [4])], [value("y", F, [4])], check=False)


def missing_external_data():
    made = mlp()
    weight = made.graph.initializer[0]
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    entry = weight.external_data.add()
    entry.key, entry.value = "location", "missing-weights.bin"
    return made


def oversized():
    """An initializer that claims 2^50 elements."""
    made = mlp()
    weight = made.graph.initializer[0]
    del weight.dims[:]
    weight.dims.extend([1 << 25, 1 << 25])
    return made


def huge_shapes():
    """A Reshape to dims whose product overflows (a fuzzer's find) and a
    ConstantOfShape of 2^60 elements."""
    return model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape"),
         helper.make_node("ConstantOfShape", ["big"], ["z"], name="fill")],
        [value("x", F, [4])], [value("y", F, [1 << 60, 1 << 40]), value("z", F, [1 << 30, 1 << 30])],
        [ints("shape", [1 << 60, 1 << 40]), ints("big", [1 << 30, 1 << 30])],
        check=False)


def half_constants():
    """f16 and bf16 Constants (their elements as 16-bit patterns), folded
    into f32 through Cast."""
    half = numpy_helper.from_array(np.array([1.5, -2.25, 65504], np.float16))
    brain = helper.make_tensor("b", TensorProto.BFLOAT16, [3],
                               [0.5, -3.0, 256.0])
    return model(
        [helper.make_node("Constant", [], ["h"], value=half),
         helper.make_node("Constant", [], ["b"], value=brain),
         helper.make_node("Cast", ["h"], ["hf"], to=F),
         helper.make_node("Cast", ["b"], ["bf"], to=F),
         helper.make_node("Add", ["hf", "x"], ["y"]),
         helper.make_node("Add", ["bf", "x"], ["z"])],
        [value("x", F, [3])], [value("y", F, [3]), value("z", F, [3])])


def huge_broadcast():
    """A sum of two known tensors of 2^13 and 2^14 elements that broadcasts
    to 2^27, more than the import folds."""
    return model(
        [helper.make_node("Add", ["rows", "columns"], ["sum"], name="add"),
         helper.make_node("Cast", ["sum"], ["y"], to=F, name="cast")],
        [], [value("y", F, [1 << 13, 1 << 14])],
        [ints("rows", np.zeros((1 << 13, 1), np.int64)),
         ints("columns", np.zeros((1, 1 << 14), np.int64))])


def huge_fill():
    return model(
        [helper.make_node("ConstantOfShape", ["big"], ["z"], name="fill")],
        [], [value("z", F, [1 << 30, 1 << 30])], [ints("big", [1 << 30, 1 << 30])],
        check=False)


def inference_dropout():
    """Dropout at inference, with its mask read: the input, an all-true
    mask."""
    return model(
        [helper.make_node("Dropout", ["x", "ratio"], ["y", "mask"])],
        [value("x", F, [4, 8])],
        [value("y", F, [4, 8]), value("mask", TensorProto.BOOL, [4, 8])],
        [numpy_helper.from_array(np.array(0.1, np.float32), "ratio")])


def training_dropout():
    """Dropout in training mode at ratio 0.25: dropped for the step."""
    return model(
        [helper.make_node("Dropout", ["x", "ratio", "training"], ["y"])],
        [value("x", F, [4, 8])], [value("y", F, [4, 8])],
        [numpy_helper.from_array(np.array(0.25, np.float32), "ratio"),
         numpy_helper.from_array(np.array(True), "training")])


def training_dropout_mask():
    """Dropout in training mode with its mask read."""
    return model(
        [helper.make_node("Dropout", ["x", "ratio", "training"],
                          ["y", "mask"])],
        [value("x", F, [4, 8])],
        [value("y", F, [4, 8]), value("mask", TensorProto.BOOL, [4, 8])],
        [numpy_helper.from_array(np.array(0.25, np.float32), "ratio"),
         numpy_helper.from_array(np.array(True), "training")])


def relocate(source, location, shift):
    """An external-data model (external_data's) whose tensors all name
    `location` instead, their offsets moved by `shift` bytes."""
    made = onnx.load(source, load_external_data=False)
    for weight in made.graph.initializer:
        for entry in weight.external_data:
            if entry.key == "location":
                entry.value = location
            elif entry.key == "offset":
                entry.value = str(int(entry.value) + shift)
    return made


def main():
    name, out = sys.argv[1], sys.argv[2]
    if name == "external_data":
        # The MLP with every initializer in one external file beside it.
        onnx.save_model(mlp(), out, save_as_external_data=True,
                        all_tensors_to_one_file=True,
                        location=os.path.basename(out) + ".data",
                        size_threshold=0)
        return
    if name == "relocate":
        # make_model.py relocate OUT SOURCE LOCATION [SHIFT]
        made = relocate(sys.argv[3], sys.argv[4],
                        int(sys.argv[5]) if len(sys.argv) > 5 else 0)
    else:
        made = globals()[name]()
    with open(out, "wb") as file:
        file.write(made.SerializeToString())


if __name__ == "__main__":
    main()
