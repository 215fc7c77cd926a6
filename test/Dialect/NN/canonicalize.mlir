// RUN: tessera-opt %s -split-input-file -canonicalize | FileCheck %s

// Tests that a double negation folds away.
// CHECK-LABEL: func.func @neg_neg(
// CHECK-SAME:      %[[X:.+]]: tensor<4x8xf32>)
// CHECK-NOT:     nn.neg
// CHECK:         return %[[X]]
func.func @neg_neg(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.neg %x : tensor<4x8xf32>
  %1 = nn.neg %0 : tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// Tests that a single negation stays.
// CHECK-LABEL: func.func @neg_single(
// CHECK-SAME:      %[[X:.+]]: tensor<4x8xf32>)
// CHECK:         %[[N:.+]] = nn.neg %[[X]] : tensor<4x8xf32>
// CHECK:         return %[[N]]
func.func @neg_single(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.neg %x : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a cast to the operand's own type folds away.
// CHECK-LABEL: func.func @cast_same_type(
// CHECK-SAME:      %[[X:.+]]: tensor<4x8xbf16>)
// CHECK-NOT:     nn.cast
// CHECK:         return %[[X]]
func.func @cast_same_type(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %0 = nn.cast %x : tensor<4x8xbf16> to tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

// Tests that a cast to another element type stays.
// CHECK-LABEL: func.func @cast_other_type(
// CHECK-SAME:      %[[X:.+]]: tensor<4x8xf32>)
// CHECK:         %[[H:.+]] = nn.cast %[[X]] : tensor<4x8xf32> to tensor<4x8xf16>
// CHECK:         return %[[H]]
func.func @cast_other_type(%x: tensor<4x8xf32>) -> tensor<4x8xf16> {
  %0 = nn.cast %x : tensor<4x8xf32> to tensor<4x8xf16>
  return %0 : tensor<4x8xf16>
}

// -----

// Tests that a broadcast that adds and expands nothing folds away.
// CHECK-LABEL: func.func @broadcast_identity(
// CHECK-SAME:      %[[X:.+]]: tensor<4x8xf32>)
// CHECK-NOT:     nn.broadcast
// CHECK:         return %[[X]]
func.func @broadcast_identity(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.broadcast %x dims = [0, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a broadcast that expands a size-1 dim stays.
// CHECK-LABEL: func.func @broadcast_expand(
// CHECK-SAME:      %[[X:.+]]: tensor<1x8xf32>)
// CHECK:         %[[B:.+]] = nn.broadcast %[[X]] dims = [0, 1] : tensor<1x8xf32> -> tensor<4x8xf32>
// CHECK:         return %[[B]]
func.func @broadcast_expand(%x: tensor<1x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.broadcast %x dims = [0, 1] : tensor<1x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a reshape to the operand's own type folds away.
// CHECK-LABEL: func.func @reshape_same_type(
// CHECK-SAME:      %[[X:.+]]: tensor<4x8xf32>)
// CHECK-NOT:     nn.reshape
// CHECK:         return %[[X]]
func.func @reshape_same_type(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.reshape %x : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a reshape of a reshape becomes one reshape of the original
// operand.
// CHECK-LABEL: func.func @reshape_reshape(
// CHECK-SAME:      %[[X:.+]]: tensor<2x8x64xf32>)
// CHECK:         %[[R:.+]] = nn.reshape %[[X]] : tensor<2x8x64xf32> -> tensor<16x64xf32>
// CHECK-NOT:     nn.reshape
// CHECK:         return %[[R]]
func.func @reshape_reshape(%x: tensor<2x8x64xf32>) -> tensor<16x64xf32> {
  %0 = nn.reshape %x : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %1 = nn.reshape %0 : tensor<2x8x4x16xf32> -> tensor<16x64xf32>
  return %1 : tensor<16x64xf32>
}

// -----

// Tests that a reshape of a reshape back to the original type folds away.
// CHECK-LABEL: func.func @reshape_reshape_back(
// CHECK-SAME:      %[[X:.+]]: tensor<2x8x64xf32>)
// CHECK-NOT:     nn.reshape
// CHECK:         return %[[X]]
func.func @reshape_reshape_back(%x: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  %0 = nn.reshape %x : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %1 = nn.reshape %0 : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>
  return %1 : tensor<2x8x64xf32>
}

// -----

// Tests that the identity transpose folds away.
// CHECK-LABEL: func.func @transpose_identity(
// CHECK-SAME:      %[[X:.+]]: tensor<2x4x8xf32>)
// CHECK-NOT:     nn.transpose
// CHECK:         return %[[X]]
func.func @transpose_identity(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %0 = nn.transpose %x permutation = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  return %0 : tensor<2x4x8xf32>
}

// -----

// Tests that two transposes compose into one.
// CHECK-LABEL: func.func @transpose_compose(
// CHECK-SAME:      %[[X:.+]]: tensor<2x4x8xf32>)
// CHECK:         %[[T:.+]] = nn.transpose %[[X]] permutation = [1, 2, 0] : tensor<2x4x8xf32> -> tensor<4x8x2xf32>
// CHECK-NOT:     nn.transpose
// CHECK:         return %[[T]]
func.func @transpose_compose(%x: tensor<2x4x8xf32>) -> tensor<4x8x2xf32> {
  %0 = nn.transpose %x permutation = [1, 0, 2] : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
  %1 = nn.transpose %0 permutation = [0, 2, 1] : tensor<4x2x8xf32> -> tensor<4x8x2xf32>
  return %1 : tensor<4x8x2xf32>
}

// -----

// Tests that two transposes that undo each other fold away.
// CHECK-LABEL: func.func @transpose_cancel(
// CHECK-SAME:      %[[X:.+]]: tensor<2x4x8xf32>)
// CHECK-NOT:     nn.transpose
// CHECK:         return %[[X]]
func.func @transpose_cancel(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %0 = nn.transpose %x permutation = [1, 2, 0] : tensor<2x4x8xf32> -> tensor<4x8x2xf32>
  %1 = nn.transpose %0 permutation = [2, 0, 1] : tensor<4x8x2xf32> -> tensor<2x4x8xf32>
  return %1 : tensor<2x4x8xf32>
}

// -----

// Tests that a transpose that permutes stays.
// CHECK-LABEL: func.func @transpose_stays(
// CHECK-SAME:      %[[X:.+]]: tensor<2x8x4x16xf32>)
// CHECK:         %[[T:.+]] = nn.transpose %[[X]] permutation = [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
// CHECK:         return %[[T]]
func.func @transpose_stays(%x: tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32> {
  %0 = nn.transpose %x permutation = [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  return %0 : tensor<2x4x8x16xf32>
}

// -----

// Tests that a slice of the whole tensor folds away.
// CHECK-LABEL: func.func @slice_full(
// CHECK-SAME:      %[[X:.+]]: tensor<4x8xf32>)
// CHECK-NOT:     nn.slice
// CHECK:         return %[[X]]
func.func @slice_full(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.slice %x start = [0, 0] limit = [4, 8] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a partial slice stays.
// CHECK-LABEL: func.func @slice_partial(
// CHECK-SAME:      %[[X:.+]]: tensor<4x8xf32>)
// CHECK:         %[[S:.+]] = nn.slice %[[X]] start = [0, 4] limit = [4, 8] : tensor<4x8xf32> -> tensor<4x4xf32>
// CHECK:         return %[[S]]
func.func @slice_partial(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  %0 = nn.slice %x start = [0, 4] limit = [4, 8] : tensor<4x8xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// Tests that a concat of one input folds away.
// CHECK-LABEL: func.func @concat_single(
// CHECK-SAME:      %[[X:.+]]: tensor<4x8xf32>)
// CHECK-NOT:     nn.concat
// CHECK:         return %[[X]]
func.func @concat_single(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.concat %x dim = 1 : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that equal constants are uniqued into one.
// CHECK-LABEL: func.func @constant_unique(
// CHECK:         %[[C:.+]] = nn.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NOT:     nn.constant
// CHECK:         return %[[C]], %[[C]]
func.func @constant_unique() -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = nn.constant dense<1.0> : tensor<4xf32>
  %1 = nn.constant dense<1.0> : tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a causal mask and a scale fold into the softmax that reads
// them, in either order, and that the masked scores' other reader keeps
// its mask.
// CHECK-LABEL: func.func @softmax_causal_scale(
// CHECK-SAME:      %[[S:.+]]: tensor<2x4x8x8xf32>)
// CHECK:         %[[P:.+]] = nn.softmax %[[S]] dim = 3 scale = 1.250000e-01 causal = true : tensor<2x4x8x8xf32>
// CHECK-NEXT:    %[[M:.+]] = nn.causal_mask %[[S]] : tensor<2x4x8x8xf32>
// CHECK-NEXT:    %[[Q:.+]] = nn.softmax %[[S]] dim = 3 scale = 1.250000e-01 causal = true : tensor<2x4x8x8xf32>
// CHECK-NEXT:    return %[[P]], %[[Q]], %[[M]]
func.func @softmax_causal_scale(%s: tensor<2x4x8x8xf32>)
    -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %c = nn.constant dense<0.125> : tensor<2x4x8x8xf32>
  %x = nn.mul %s, %c : tensor<2x4x8x8xf32>
  %m = nn.causal_mask %x : tensor<2x4x8x8xf32>
  %p = nn.softmax %m dim = 3 : tensor<2x4x8x8xf32>
  %n = nn.causal_mask %s : tensor<2x4x8x8xf32>
  %y = nn.mul %c, %n : tensor<2x4x8x8xf32>
  %q = nn.softmax %y dim = 3 : tensor<2x4x8x8xf32>
  return %p, %q, %n : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

// -----

// Tests what does not fold: a 16-bit product (it rounds), a scale that is
// not a splat, a mask filled with 0, a mask under a negative scale (it
// would flip -infinity), and a mask read along another dim.
// CHECK-LABEL: func.func @softmax_stays(
// CHECK:         nn.mul
// CHECK-NEXT:    nn.softmax %{{.+}} dim = 1 : tensor<4x4xbf16>
// CHECK:         nn.mul
// CHECK-NEXT:    nn.softmax %{{.+}} dim = 1 : tensor<4x4xf32>
// CHECK:         nn.causal_mask %{{.+}} fill = 0.000000e+00
// CHECK-NEXT:    nn.softmax %{{.+}} dim = 1 : tensor<4x4xf32>
// CHECK:         %[[M:.+]] = nn.causal_mask %{{.+}} : tensor<4x4xf32>
// CHECK-NEXT:    nn.softmax %[[M]] dim = 1 scale = -5.000000e-01 : tensor<4x4xf32>
// CHECK-NEXT:    nn.softmax %[[M]] dim = 0 : tensor<4x4xf32>
func.func @softmax_stays(%h: tensor<4x4xbf16>, %s: tensor<4x4xf32>, %d: tensor<4x4xf32>)
    -> (tensor<4x4xbf16>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %ch = nn.constant dense<0.5> : tensor<4x4xbf16>
  %xh = nn.mul %h, %ch : tensor<4x4xbf16>
  %ph = nn.softmax %xh dim = 1 : tensor<4x4xbf16>
  %xd = nn.mul %s, %d : tensor<4x4xf32>
  %pd = nn.softmax %xd dim = 1 : tensor<4x4xf32>
  %z = nn.causal_mask %s fill = 0.0 : tensor<4x4xf32>
  %pz = nn.softmax %z dim = 1 : tensor<4x4xf32>
  %m = nn.causal_mask %s : tensor<4x4xf32>
  %pn = nn.softmax %m dim = 1 scale = -0.5 : tensor<4x4xf32>
  %pc = nn.softmax %m dim = 0 : tensor<4x4xf32>
  return %ph, %pd, %pz, %pn, %pc : tensor<4x4xbf16>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
