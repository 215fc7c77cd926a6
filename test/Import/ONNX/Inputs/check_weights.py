#!/usr/bin/env python3
"""Checks a --weights-out file against the model's initializers: the
parameters in argument order (the order of the initializers that are
parameters), with their values in their order. A weight whose parts have
a dim of their own (a fused projection) has the initializer's elements in
another shape, which is printed."""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
import tsrt  # noqa: E402

model = onnx.load(sys.argv[1])
weights = tsrt.read(sys.argv[2])
initializers = [numpy_helper.to_array(tensor)
                for tensor in model.graph.initializer]
if len(weights) != len(initializers):
    sys.exit(f"{len(weights)} weights, {len(initializers)} initializers")
for index, (weight, initializer) in enumerate(zip(weights, initializers)):
    if weight.size != initializer.size or not np.array_equal(
            weight.reshape(initializer.shape), initializer):
        sys.exit(f"weight #{index} differs from its initializer")
    if weight.shape != initializer.shape:
        print(f"weight #{index} has shape {list(weight.shape)}, its "
              f"initializer {list(initializer.shape)}")
print(f"{len(weights)} weights match the initializers")
