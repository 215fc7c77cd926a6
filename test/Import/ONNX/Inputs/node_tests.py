#!/usr/bin/env python3
"""ONNX's own node tests (libonnx-testdata) through Tessera.

Each test is a model of one op with input and expected output protobufs.
For every test of an op type the importer claims: `tessera import`,
`tessera compile` (one device), `tessera-run --inputs` on one rank, and the
results compared with the expected outputs (within 1e-4 relative and 1e-5
absolute; 1e-2 for 16-bit floats). Prints per-op pass counts and the reason
of each test that does not pass. Fails when a test listed in EXPECTED does
not pass (a regression); a pass that is not listed is reported, to be added.

  node_tests.py --bin build/bin --expected expected-passes.txt [--data DIR]
      [--only PATTERN] [--update]
"""
import argparse
import collections
import concurrent.futures
import glob
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
import tsrt  # noqa: E402

# The op types the importer claims (lib/Import/ONNX).
CLAIMED = {
    "Abs", "Add", "Cast", "Clip", "Concat", "Constant", "ConstantOfShape",
    "Cos", "Div", "Dropout", "Equal", "Erf", "Exp", "Expand", "Flatten",
    "Gather", "Gemm", "Greater", "Identity", "LayerNormalization", "Less",
    "Log", "LogSoftmax", "MatMul", "Max", "Min", "Mul", "Neg", "Pow", "Range",
    "Reciprocal", "ReduceMax", "ReduceMean", "ReduceSum", "Relu", "Reshape",
    "Shape", "Sigmoid", "Sin", "Slice", "Softmax", "Split", "Sqrt", "Squeeze",
    "Sub", "Tanh", "Tile", "Transpose", "Trilu", "Unsqueeze", "Where",
}


INTEGER_TYPES = {onnx.TensorProto.INT64, onnx.TensorProto.INT32}


def first_line(text):
    for line in text.strip().splitlines():
        line = re.sub(r"^tessera(-run)?: error: ", "", line.strip())
        if line:
            return line
    return "(no message)"


def load_tensor(path, value_info):
    """A TensorProto file as numpy; bfloat16 (which the test data stores as
    its bits, UINT16) as tsrt.BFloat16."""
    array = numpy_helper.to_array(onnx.load_tensor(path))
    if value_info.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
        return tsrt.BFloat16(array)
    return array


def numbered(directory, prefix):
    return sorted(glob.glob(os.path.join(directory, prefix + "_*.pb")),
                  key=lambda path: int(re.findall(r"\d+", path)[-1]))


def run_data_set(model_path, model, data_set, binaries, scratch):
    """'pass' or the reason it does not. Integer inputs (the shapes, axes
    and indices that node tests give as inputs) are bound at import: Tessera
    compiles static shapes."""
    tool = os.path.join(binaries, "tessera")
    mlir = os.path.join(scratch, "model.mlir")
    weights = os.path.join(scratch, "weights.tsrt")
    plan = os.path.join(scratch, "model.plan")
    initializers = {tensor.name for tensor in model.graph.initializer}
    graph_inputs = [input for input in model.graph.input
                    if input.name not in initializers]
    input_files = numbered(data_set, "input")
    command = [tool, "import", model_path, "-o", mlir, "--weights-out", weights]
    data = []
    for input, path in zip(graph_inputs, input_files):
        if input.type.tensor_type.elem_type in INTEGER_TYPES:
            command.append(f"--bind={input.name}={path}")
        else:
            data.append(load_tensor(path, input))
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        return "import: " + first_line(done.stderr)
    done = subprocess.run([tool, "compile", mlir, "-o", plan],
                          capture_output=True, text=True)
    if done.returncode:
        return "compile: " + first_line(done.stderr)
    expected = [load_tensor(path, output) for path, output in
                zip(numbered(data_set, "output"), model.graph.output)]
    given = os.path.join(scratch, "inputs.tsrt")
    got = os.path.join(scratch, "outputs.tsrt")
    try:
        tsrt.write(given, data + tsrt.read(weights))
    except ValueError as error:
        return f"inputs: {error}"
    # Open MPI's session directory of its own: runs of tests in parallel
    # share /tmp/ompi.<host>.<uid> otherwise, and one's cleanup can remove
    # it while another starts (open-mpi/ompi#8510).
    done = subprocess.run(
        [os.path.join(binaries, "tessera-run"), plan, "--inputs", given,
         "--dump-outputs", got], capture_output=True, text=True,
        env=dict(os.environ,
                 OMPI_MCA_orte_tmpdir_base=os.path.join(scratch, "ompi")))
    if done.returncode:
        return "run: " + first_line(done.stderr)
    outputs = tsrt.read(got)
    if len(outputs) != len(expected):
        return f"outputs: {len(outputs)} results, expected {len(expected)}"
    for index, (out, want) in enumerate(zip(outputs, expected)):
        sixteen = want.dtype == np.float16 if not isinstance(
            want, tsrt.BFloat16) else True
        if isinstance(want, tsrt.BFloat16):
            want = want.to_float32()
        if out.shape != want.shape:
            return (f"output #{index}: shape {list(out.shape)}, "
                    f"expected {list(want.shape)}")
        if want.dtype.kind in "biu":
            if not np.array_equal(out, want.astype(out.dtype)):
                return f"output #{index}: values differ"
            continue
        tolerance = 1e-2 if sixteen else 1e-4
        want64, out64 = want.astype(np.float64), out.astype(np.float64)
        if not np.allclose(out64, want64, rtol=tolerance, atol=tolerance / 10,
                           equal_nan=True):
            error = np.nanmax(np.abs(out64 - want64))
            return f"output #{index}: differs by up to {error:.3g}"
    return "pass"


def run_test(directory, binaries):
    """'pass' or the reason the first data set that fails does not."""
    model_path = os.path.join(directory, "model.onnx")
    model = onnx.load(model_path, load_external_data=False)
    for data_set in sorted(glob.glob(os.path.join(directory,
                                                  "test_data_set_*"))):
        with tempfile.TemporaryDirectory() as scratch:
            try:
                result = run_data_set(model_path, model, data_set, binaries,
                                      scratch)
            except ValueError as error:  # data numpy_helper cannot read
                result = f"test data: {error}"
        if result != "pass":
            return result
    return "pass"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", required=True, help="Tessera's build/bin")
    parser.add_argument("--expected", required=True,
                        help="the tests that must pass, one per line")
    parser.add_argument("--data",
                        default="/usr/share/libonnx-testdata/data/node")
    parser.add_argument("--only", help="run the tests matching this regex")
    parser.add_argument("--update", action="store_true",
                        help="rewrite --expected with this run's passes")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()

    def single_op(directory):
        """The claimed op a test's model is made of, or None."""
        try:
            model = onnx.load(os.path.join(directory, "model.onnx"),
                              load_external_data=False)
        except Exception:  # a model onnx itself cannot read
            return None
        nodes = model.graph.node
        if len(nodes) == 1 and nodes[0].op_type in CLAIMED:
            return nodes[0].op_type
        return None

    # The tests of one claimed op, and their "_expanded" variants (the op's
    # function body, counted as the op's).
    tests = []
    for directory in sorted(glob.glob(os.path.join(args.data, "test_*"))):
        name = os.path.basename(directory)
        if args.only and not re.search(args.only, name):
            continue
        op = single_op(directory)
        if op is None and name.endswith("_expanded"):
            op = single_op(directory[:-len("_expanded")])
        if op:
            tests.append((name, directory, op))

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda test: run_test(test[1], args.bin),
                                tests))

    expected = set()
    if not args.update:
        with open(args.expected) as file:
            expected = {line.split("#")[0].strip() for line in file} - {""}
    per_op = collections.defaultdict(lambda: [0, 0])
    regressions, new = [], []
    for (name, _, op), result in zip(tests, results):
        per_op[op][1] += 1
        if result == "pass":
            per_op[op][0] += 1
            if name not in expected:
                new.append(name)
        else:
            print(f"{name}: {result}")
            if name in expected:
                regressions.append(name)
    print()
    print(f"{'op':<20} {'pass':>5} {'tests':>6}")
    for op in sorted(per_op):
        print(f"{op:<20} {per_op[op][0]:>5} {per_op[op][1]:>6}")
    passed = sum(count[0] for count in per_op.values())
    print(f"{'total':<20} {passed:>5} {len(tests):>6}")
    if args.update:
        with open(args.expected, "w") as file:
            file.write("# ONNX node tests that pass through import, compile "
                       "and tessera-run\n# (node_tests.py --update writes "
                       "it).\n")
            for (name, _, _), result in zip(tests, results):
                if result == "pass":
                    file.write(name + "\n")
        return 0
    for name in new:
        print(f"new pass (add it to {os.path.basename(args.expected)}): {name}")
    for name in regressions:
        print(f"REGRESSION: {name} passed before")
    missing = sorted(expected - {name for name, _, _ in tests})
    for name in missing:
        print(f"MISSING: {name} is expected but not run")
    return 1 if regressions or missing else 0


if __name__ == "__main__":
    sys.exit(main())
