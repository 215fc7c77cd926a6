// RUN: tessera-opt %s -split-input-file | tessera-opt -split-input-file | FileCheck %s
// RUN: tessera-opt %s -split-input-file -mlir-print-op-generic | tessera-opt -split-input-file | FileCheck %s

// Tests that a dot without batching dims and an `nn.param` argument round-trip.
// CHECK-LABEL: func.func @dot(
// CHECK-SAME:      %[[X:.+]]: tensor<2x8x16xf32>, %[[W:.+]]: tensor<16x64xf32> {nn.param = "w"})
// CHECK:         %[[Y:.+]] = nn.dot %[[X]], %[[W]] contracting_dims = [2] x [0] : (tensor<2x8x16xf32>, tensor<16x64xf32>) -> tensor<2x8x64xf32>
// CHECK:         return %[[Y]]
func.func @dot(%x: tensor<2x8x16xf32>, %w: tensor<16x64xf32> {nn.param = "w"}) -> tensor<2x8x64xf32> {
  %y = nn.dot %x, %w contracting_dims = [2] x [0]
      : (tensor<2x8x16xf32>, tensor<16x64xf32>) -> tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}

// -----

// Tests that a dot with batching dims on bf16 round-trips.
// CHECK-LABEL: func.func @dot_batching(
// CHECK-SAME:      %[[Q:.+]]: tensor<2x4x8x16xbf16>, %[[K:.+]]: tensor<2x4x8x16xbf16>)
// CHECK:         %[[S:.+]] = nn.dot %[[Q]], %[[K]] batching_dims = [0, 1] x [0, 1] contracting_dims = [3] x [3] : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x8xbf16>
// CHECK:         return %[[S]]
func.func @dot_batching(%q: tensor<2x4x8x16xbf16>, %k: tensor<2x4x8x16xbf16>) -> tensor<2x4x8x8xbf16> {
  %s = nn.dot %q, %k batching_dims = [0, 1] x [0, 1] contracting_dims = [3] x [3]
      : (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> tensor<2x4x8x8xbf16>
  return %s : tensor<2x4x8x8xbf16>
}

// -----

// Tests that the elementwise binary ops round-trip on f16.
// CHECK-LABEL: func.func @binary(
// CHECK-SAME:      %[[A:.+]]: tensor<4x8xf16>, %[[B:.+]]: tensor<4x8xf16>)
// CHECK:         %[[ADD:.+]] = nn.add %[[A]], %[[B]] : tensor<4x8xf16>
// CHECK:         %[[SUB:.+]] = nn.sub %[[ADD]], %[[B]] : tensor<4x8xf16>
// CHECK:         %[[MUL:.+]] = nn.mul %[[SUB]], %[[A]] : tensor<4x8xf16>
// CHECK:         %[[DIV:.+]] = nn.div %[[MUL]], %[[B]] : tensor<4x8xf16>
// CHECK:         %[[MAX:.+]] = nn.max %[[DIV]], %[[B]] : tensor<4x8xf16>
// CHECK:         %[[MIN:.+]] = nn.min %[[MAX]], %[[A]] : tensor<4x8xf16>
// CHECK:         %[[POW:.+]] = nn.pow %[[MIN]], %[[B]] : tensor<4x8xf16>
// CHECK:         return %[[POW]]
func.func @binary(%a: tensor<4x8xf16>, %b: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %0 = nn.add %a, %b : tensor<4x8xf16>
  %1 = nn.sub %0, %b : tensor<4x8xf16>
  %2 = nn.mul %1, %a : tensor<4x8xf16>
  %3 = nn.div %2, %b : tensor<4x8xf16>
  %4 = nn.max %3, %b : tensor<4x8xf16>
  %5 = nn.min %4, %a : tensor<4x8xf16>
  %6 = nn.pow %5, %b : tensor<4x8xf16>
  return %6 : tensor<4x8xf16>
}

// -----

// Tests that clamp round-trips with both bounds, one, or none.
// CHECK-LABEL: func.func @clamp(
// CHECK:         nn.clamp %{{.+}} min = -1.000000e+00 max = 1.000000e+00 : tensor<4xf32>
// CHECK:         nn.clamp %{{.+}} min = 0.000000e+00 : tensor<4xf32>
// CHECK:         nn.clamp %{{.+}} : tensor<4xf32>
func.func @clamp(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.clamp %x min = -1.0 max = 1.0 : tensor<4xf32>
  %1 = nn.clamp %0 min = 0.0 : tensor<4xf32>
  %2 = nn.clamp %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// Tests that the elementwise unary ops round-trip.
// CHECK-LABEL: func.func @unary(
// CHECK-SAME:      %[[X:.+]]: tensor<4x8xf32>)
// CHECK:         %[[NEG:.+]] = nn.neg %[[X]] : tensor<4x8xf32>
// CHECK:         %[[EXP:.+]] = nn.exp %[[NEG]] : tensor<4x8xf32>
// CHECK:         %[[LOG:.+]] = nn.log %[[EXP]] : tensor<4x8xf32>
// CHECK:         %[[SQRT:.+]] = nn.sqrt %[[LOG]] : tensor<4x8xf32>
// CHECK:         %[[RSQRT:.+]] = nn.rsqrt %[[SQRT]] : tensor<4x8xf32>
// CHECK:         %[[TANH:.+]] = nn.tanh %[[RSQRT]] : tensor<4x8xf32>
// CHECK:         %[[RELU:.+]] = nn.relu %[[TANH]] : tensor<4x8xf32>
// CHECK:         %[[GELU:.+]] = nn.gelu %[[RELU]] : tensor<4x8xf32>
// CHECK:         %[[SILU:.+]] = nn.silu %[[GELU]] : tensor<4x8xf32>
// CHECK:         %[[SIN:.+]] = nn.sin %[[SILU]] : tensor<4x8xf32>
// CHECK:         %[[COS:.+]] = nn.cos %[[SIN]] : tensor<4x8xf32>
// CHECK:         %[[ERF:.+]] = nn.erf %[[COS]] : tensor<4x8xf32>
// CHECK:         %[[SIG:.+]] = nn.sigmoid %[[ERF]] : tensor<4x8xf32>
// CHECK:         %[[ABS:.+]] = nn.abs %[[SIG]] : tensor<4x8xf32>
// CHECK:         return %[[ABS]]
func.func @unary(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.neg %x : tensor<4x8xf32>
  %1 = nn.exp %0 : tensor<4x8xf32>
  %2 = nn.log %1 : tensor<4x8xf32>
  %3 = nn.sqrt %2 : tensor<4x8xf32>
  %4 = nn.rsqrt %3 : tensor<4x8xf32>
  %5 = nn.tanh %4 : tensor<4x8xf32>
  %6 = nn.relu %5 : tensor<4x8xf32>
  %7 = nn.gelu %6 : tensor<4x8xf32>
  %8 = nn.silu %7 : tensor<4x8xf32>
  %9 = nn.sin %8 : tensor<4x8xf32>
  %10 = nn.cos %9 : tensor<4x8xf32>
  %11 = nn.erf %10 : tensor<4x8xf32>
  %12 = nn.sigmoid %11 : tensor<4x8xf32>
  %13 = nn.abs %12 : tensor<4x8xf32>
  return %13 : tensor<4x8xf32>
}

// -----

// Tests that select round-trips.
// CHECK-LABEL: func.func @select(
// CHECK-SAME:      %[[C:.+]]: tensor<4x8xi1>, %[[A:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<4x8xf32>)
// CHECK:         %[[R:.+]] = nn.select %[[C]], %[[A]], %[[B]] : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK:         return %[[R]]
func.func @select(%c: tensor<4x8xi1>, %a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = nn.select %c, %a, %b : tensor<4x8xi1>, tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// Tests that compare round-trips with several predicates on float and integer
// tensors and infers an i1 result of the operands' shape.
// CHECK-LABEL: func.func @compare(
// CHECK-SAME:      %[[A:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<4x8xf32>, %[[I:.+]]: tensor<8xi32>, %[[J:.+]]: tensor<8xi32>)
// CHECK:         %[[LT:.+]] = nn.compare lt, %[[A]], %[[B]] : tensor<4x8xf32>
// CHECK:         %[[EQ:.+]] = nn.compare eq, %[[I]], %[[J]] : tensor<8xi32>
// CHECK:         %[[GE:.+]] = nn.compare ge, %[[I]], %[[J]] : tensor<8xi32>
// CHECK:         return %[[LT]], %[[EQ]], %[[GE]] : tensor<4x8xi1>, tensor<8xi1>, tensor<8xi1>
func.func @compare(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %i: tensor<8xi32>, %j: tensor<8xi32>)
    -> (tensor<4x8xi1>, tensor<8xi1>, tensor<8xi1>) {
  %c = nn.compare lt, %a, %b : tensor<4x8xf32>
  %d = nn.compare eq, %i, %j : tensor<8xi32>
  %e = nn.compare ge, %i, %j : tensor<8xi32>
  return %c, %d, %e : tensor<4x8xi1>, tensor<8xi1>, tensor<8xi1>
}

// -----

// Tests that cast round-trips between float widths and from i1.
// CHECK-LABEL: func.func @cast(
// CHECK-SAME:      %[[X:.+]]: tensor<4x8xf32>, %[[M:.+]]: tensor<4x8xi1>)
// CHECK:         %[[H:.+]] = nn.cast %[[X]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK:         %[[F:.+]] = nn.cast %[[M]] : tensor<4x8xi1> to tensor<4x8xf16>
// CHECK:         return %[[H]], %[[F]]
func.func @cast(%x: tensor<4x8xf32>, %m: tensor<4x8xi1>) -> (tensor<4x8xbf16>, tensor<4x8xf16>) {
  %h = nn.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
  %f = nn.cast %m : tensor<4x8xi1> to tensor<4x8xf16>
  return %h, %f : tensor<4x8xbf16>, tensor<4x8xf16>
}

// -----

// Tests that dense and splat constants round-trip.
// CHECK-LABEL: func.func @constant(
// CHECK:         %[[D:.+]] = nn.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK:         %[[S:.+]] = nn.constant dense<1.250000e-01> : tensor<2x4x8x8xf32>
// CHECK:         %[[I:.+]] = nn.constant dense<[0, 1, 2]> : tensor<3xi32>
// CHECK:         return %[[D]], %[[S]], %[[I]]
func.func @constant() -> (tensor<2x2xf32>, tensor<2x4x8x8xf32>, tensor<3xi32>) {
  %d = nn.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %s = nn.constant dense<0.125> : tensor<2x4x8x8xf32>
  %i = nn.constant dense<[0, 1, 2]> : tensor<3xi32>
  return %d, %s, %i : tensor<2x2xf32>, tensor<2x4x8x8xf32>, tensor<3xi32>
}

// -----

// Tests that iota round-trips in float and integer types, and with a piece
// index.
// CHECK-LABEL: func.func @iota(
// CHECK:         %[[P:.+]] = nn.iota dim = 0 : tensor<8x4xf32>
// CHECK:         %[[I:.+]] = nn.iota dim = 1 : tensor<2x3xi64>
// CHECK:         nn.iota dim = 0 piece %{{.+}} : tensor<1xi64> : tensor<8x4xf32>
// CHECK:         return %[[P]], %[[I]]
func.func @iota(%piece: tensor<1xi64>) -> (tensor<8x4xf32>, tensor<2x3xi64>) {
  %p = nn.iota dim = 0 : tensor<8x4xf32>
  %i = nn.iota dim = 1 : tensor<2x3xi64>
  %q = nn.iota dim = 0 piece %piece : tensor<1xi64> : tensor<8x4xf32>
  return %p, %i : tensor<8x4xf32>, tensor<2x3xi64>
}

// -----

// Tests that broadcast round-trips, adding dims and expanding a size-1 dim.
// CHECK-LABEL: func.func @broadcast(
// CHECK-SAME:      %[[B:.+]]: tensor<64xf32>, %[[C:.+]]: tensor<1x64xf32>)
// CHECK:         %[[B3:.+]] = nn.broadcast %[[B]] dims = [2] : tensor<64xf32> -> tensor<2x8x64xf32>
// CHECK:         %[[C2:.+]] = nn.broadcast %[[C]] dims = [0, 1] : tensor<1x64xf32> -> tensor<8x64xf32>
// CHECK:         return %[[B3]], %[[C2]]
func.func @broadcast(%b: tensor<64xf32>, %c: tensor<1x64xf32>) -> (tensor<2x8x64xf32>, tensor<8x64xf32>) {
  %0 = nn.broadcast %b dims = [2] : tensor<64xf32> -> tensor<2x8x64xf32>
  %1 = nn.broadcast %c dims = [0, 1] : tensor<1x64xf32> -> tensor<8x64xf32>
  return %0, %1 : tensor<2x8x64xf32>, tensor<8x64xf32>
}

// -----

// Tests that the reductions round-trip, including a reduction to rank 0.
// CHECK-LABEL: func.func @reduce(
// CHECK-SAME:      %[[X:.+]]: tensor<4x8xf32>)
// CHECK:         %[[SUM:.+]] = nn.reduce_sum %[[X]] dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
// CHECK:         %[[MAX:.+]] = nn.reduce_max %[[X]] dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
// CHECK:         %[[MEAN:.+]] = nn.reduce_mean %[[X]] dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
// CHECK:         return %[[SUM]], %[[MAX]], %[[MEAN]]
func.func @reduce(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<8xf32>, tensor<f32>) {
  %s = nn.reduce_sum %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %m = nn.reduce_max %x dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %a = nn.reduce_mean %x dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %s, %m, %a : tensor<4xf32>, tensor<8xf32>, tensor<f32>
}

// -----

// Tests that reshape round-trips.
// CHECK-LABEL: func.func @reshape(
// CHECK-SAME:      %[[Q:.+]]: tensor<2x8x64xf32>)
// CHECK:         %[[R:.+]] = nn.reshape %[[Q]] : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
// CHECK:         return %[[R]]
func.func @reshape(%q: tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32> {
  %r = nn.reshape %q : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  return %r : tensor<2x8x4x16xf32>
}

// -----

// Tests that transpose round-trips.
// CHECK-LABEL: func.func @transpose(
// CHECK-SAME:      %[[X:.+]]: tensor<2x8x4x16xf32>)
// CHECK:         %[[T:.+]] = nn.transpose %[[X]] permutation = [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
// CHECK:         return %[[T]]
func.func @transpose(%x: tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32> {
  %t = nn.transpose %x permutation = [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  return %t : tensor<2x4x8x16xf32>
}

// -----

// Tests that slice round-trips.
// CHECK-LABEL: func.func @slice(
// CHECK-SAME:      %[[QKV:.+]]: tensor<2x8x192xf32>)
// CHECK:         %[[K:.+]] = nn.slice %[[QKV]] start = [0, 0, 64] limit = [2, 8, 128] : tensor<2x8x192xf32> -> tensor<2x8x64xf32>
// CHECK:         return %[[K]]
func.func @slice(%qkv: tensor<2x8x192xf32>) -> tensor<2x8x64xf32> {
  %k = nn.slice %qkv start = [0, 0, 64] limit = [2, 8, 128]
      : tensor<2x8x192xf32> -> tensor<2x8x64xf32>
  return %k : tensor<2x8x64xf32>
}

// -----

// Tests that concat round-trips.
// CHECK-LABEL: func.func @concat(
// CHECK-SAME:      %[[A:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<4x16xf32>)
// CHECK:         %[[C:.+]] = nn.concat %[[A]], %[[B]] dim = 1 : tensor<4x8xf32>, tensor<4x16xf32> -> tensor<4x24xf32>
// CHECK:         return %[[C]]
func.func @concat(%a: tensor<4x8xf32>, %b: tensor<4x16xf32>) -> tensor<4x24xf32> {
  %c = nn.concat %a, %b dim = 1 : tensor<4x8xf32>, tensor<4x16xf32> -> tensor<4x24xf32>
  return %c : tensor<4x24xf32>
}

// -----

// Tests that softmax and log_softmax round-trip on f16, and a scaled,
// causal softmax with its attributes (the defaults elided).
// CHECK-LABEL: func.func @softmax(
// CHECK-SAME:      %[[S:.+]]: tensor<2x4x8x8xf16>)
// CHECK:         %[[P:.+]] = nn.softmax %[[S]] dim = 3 : tensor<2x4x8x8xf16>
// CHECK:         %[[L:.+]] = nn.log_softmax %[[S]] dim = 3 : tensor<2x4x8x8xf16>
// CHECK:         %[[C:.+]] = nn.softmax %[[S]] dim = 3 scale = 1.250000e-01 causal = true : tensor<2x4x8x8xf16>
// CHECK:         %[[D:.+]] = nn.softmax %[[S]] dim = 3 : tensor<2x4x8x8xf16>
// CHECK:         return %[[P]], %[[L]], %[[C]], %[[D]]
func.func @softmax(%s: tensor<2x4x8x8xf16>) -> (tensor<2x4x8x8xf16>, tensor<2x4x8x8xf16>, tensor<2x4x8x8xf16>, tensor<2x4x8x8xf16>) {
  %p = nn.softmax %s dim = 3 : tensor<2x4x8x8xf16>
  %l = nn.log_softmax %s dim = 3 : tensor<2x4x8x8xf16>
  %c = nn.softmax %s dim = 3 scale = 0.125 causal = true : tensor<2x4x8x8xf16>
  %d = nn.softmax %s dim = 3 scale = 1.0 causal = false : tensor<2x4x8x8xf16>
  return %p, %l, %c, %d : tensor<2x4x8x8xf16>, tensor<2x4x8x8xf16>, tensor<2x4x8x8xf16>, tensor<2x4x8x8xf16>
}

// -----

// Tests that layer_norm round-trips with the default epsilon (not printed),
// an explicit default epsilon (elided) and another epsilon (kept).
// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME:      %[[X:.+]]: tensor<2x8x64xf32>, %[[G:.+]]: tensor<64xf32>, %[[B:.+]]: tensor<64xf32>)
// CHECK:         %[[Y0:.+]] = nn.layer_norm %[[X]], %[[G]], %[[B]] : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
// CHECK:         %[[Y1:.+]] = nn.layer_norm %[[X]], %[[G]], %[[B]] : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
// CHECK:         %[[Y2:.+]] = nn.layer_norm %[[X]], %[[G]], %[[B]] epsilon = 9.99999997E-7 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
// CHECK:         return %[[Y0]], %[[Y1]], %[[Y2]]
func.func @layer_norm(%x: tensor<2x8x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>)
    -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>) {
  %0 = nn.layer_norm %x, %g, %b : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
  %1 = nn.layer_norm %x, %g, %b epsilon = 1.0e-05 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
  %2 = nn.layer_norm %x, %g, %b epsilon = 1.0e-06 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
  return %0, %1, %2 : tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>
}

// -----

// Tests that rms_norm round-trips on bf16 with and without an explicit
// epsilon.
// CHECK-LABEL: func.func @rms_norm(
// CHECK-SAME:      %[[X:.+]]: tensor<2x8x64xbf16>, %[[G:.+]]: tensor<64xbf16>)
// CHECK:         %[[Y0:.+]] = nn.rms_norm %[[X]], %[[G]] : tensor<2x8x64xbf16>, tensor<64xbf16>
// CHECK:         %[[Y1:.+]] = nn.rms_norm %[[X]], %[[G]] epsilon = 9.99999974E-6 : tensor<2x8x64xbf16>, tensor<64xbf16>
// CHECK:         return %[[Y0]], %[[Y1]]
func.func @rms_norm(%x: tensor<2x8x64xbf16>, %g: tensor<64xbf16>) -> (tensor<2x8x64xbf16>, tensor<2x8x64xbf16>) {
  %0 = nn.rms_norm %x, %g : tensor<2x8x64xbf16>, tensor<64xbf16>
  %1 = nn.rms_norm %x, %g epsilon = 1.0e-05 : tensor<2x8x64xbf16>, tensor<64xbf16>
  return %0, %1 : tensor<2x8x64xbf16>, tensor<2x8x64xbf16>
}

// -----

// Tests that the fused norm gradients round-trip and infer two results of
// the input's type (dx and the normalized input).
// CHECK-LABEL: func.func @norm_grads(
// CHECK-SAME:      %[[X:.+]]: tensor<2x8x64xf32>, %[[G:.+]]: tensor<64xf32>, %[[DY:.+]]: tensor<2x8x64xf32>)
// CHECK:         %[[DX:.+]], %{{.+}} = nn.layer_norm_grad %[[X]], %[[G]], %[[DY]] : tensor<2x8x64xf32>, tensor<64xf32>, tensor<2x8x64xf32>
// CHECK:         %{{.+}}, %[[XHAT:.+]] = nn.rms_norm_grad %[[X]], %[[G]], %[[DY]] epsilon = 9.99999974E-6 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<2x8x64xf32>
// CHECK:         return %[[DX]], %[[XHAT]]
func.func @norm_grads(%x: tensor<2x8x64xf32>, %g: tensor<64xf32>, %dy: tensor<2x8x64xf32>)
    -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>) {
  %dx, %xhat = nn.layer_norm_grad %x, %g, %dy : tensor<2x8x64xf32>, tensor<64xf32>, tensor<2x8x64xf32>
  %rdx, %rxhat = nn.rms_norm_grad %x, %g, %dy epsilon = 1.0e-05 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<2x8x64xf32>
  return %dx, %rxhat : tensor<2x8x64xf32>, tensor<2x8x64xf32>
}

// -----

// Tests that embedding round-trips and infers the `indices ++ [hidden]` shape.
// CHECK-LABEL: func.func @embedding(
// CHECK-SAME:      %[[WTE:.+]]: tensor<512x64xbf16> {nn.param = "wte"}, %[[TOKENS:.+]]: tensor<2x8xi32>)
// CHECK:         %[[E:.+]] = nn.embedding %[[WTE]], %[[TOKENS]] : tensor<512x64xbf16>, tensor<2x8xi32>
// CHECK:         return %[[E]] : tensor<2x8x64xbf16>
func.func @embedding(%wte: tensor<512x64xbf16> {nn.param = "wte"}, %tokens: tensor<2x8xi32>) -> tensor<2x8x64xbf16> {
  %e = nn.embedding %wte, %tokens : tensor<512x64xbf16>, tensor<2x8xi32>
  return %e : tensor<2x8x64xbf16>
}

// -----

// Tests that the ops that position integers against a split dim round-trip
// with a device's piece index.
// CHECK-LABEL: func.func @offset_pieces(
// CHECK:         nn.embedding %{{.+}}, %{{.+}} piece %{{.+}} : tensor<256x64xf32>, tensor<2x8xi32>, tensor<1xi64>
// CHECK:         nn.embedding_grad %{{.+}}, %{{.+}} piece %{{.+}} vocab = 256 : tensor<2x8x64xf32>, tensor<2x8xi32>, tensor<1xi64>
// CHECK:         nn.one_hot %{{.+}} piece %{{.+}} : tensor<2x8xi32>, tensor<1xi64> -> tensor<2x8x256xf32>
func.func @offset_pieces(%t: tensor<256x64xf32>, %i: tensor<2x8xi32>, %p: tensor<1xi64>)
    -> (tensor<2x8x64xf32>, tensor<256x64xf32>, tensor<2x8x256xf32>) {
  %e = nn.embedding %t, %i piece %p : tensor<256x64xf32>, tensor<2x8xi32>, tensor<1xi64>
  %g = nn.embedding_grad %e, %i piece %p vocab = 256 : tensor<2x8x64xf32>, tensor<2x8xi32>, tensor<1xi64>
  %h = nn.one_hot %i piece %p : tensor<2x8xi32>, tensor<1xi64> -> tensor<2x8x256xf32>
  return %e, %g, %h : tensor<2x8x64xf32>, tensor<256x64xf32>, tensor<2x8x256xf32>
}

// -----

// Tests that cross_entropy round-trips and infers the labels' shape.
// CHECK-LABEL: func.func @cross_entropy(
// CHECK-SAME:      %[[LOGITS:.+]]: tensor<2x8x512xf32>, %[[LABELS:.+]]: tensor<2x8xi64>)
// CHECK:         %[[L:.+]] = nn.cross_entropy %[[LOGITS]], %[[LABELS]] : tensor<2x8x512xf32>, tensor<2x8xi64>
// CHECK:         return %[[L]] : tensor<2x8xf32>
func.func @cross_entropy(%logits: tensor<2x8x512xf32>, %labels: tensor<2x8xi64>) -> tensor<2x8xf32> {
  %l = nn.cross_entropy %logits, %labels : tensor<2x8x512xf32>, tensor<2x8xi64>
  return %l : tensor<2x8xf32>
}

// -----

// Tests that causal_mask round-trips.
// CHECK-LABEL: func.func @causal_mask(
// CHECK-SAME:      %[[S:.+]]: tensor<2x4x8x8xf32>)
// CHECK:         %[[M:.+]] = nn.causal_mask %[[S]] : tensor<2x4x8x8xf32>
// CHECK:         %[[Z:.+]] = nn.causal_mask %[[M]] fill = 0.000000e+00 : tensor<2x4x8x8xf32>
// CHECK:         return %[[Z]]
func.func @causal_mask(%s: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %m = nn.causal_mask %s : tensor<2x4x8x8xf32>
  %z = nn.causal_mask %m fill = 0.0 : tensor<2x4x8x8xf32>
  return %z : tensor<2x4x8x8xf32>
}

// -----

// Tests that sgd round-trips with the default and an explicit weight decay.
// CHECK-LABEL: func.func @sgd(
// CHECK-SAME:      %[[P:.+]]: tensor<16x64xf32> {nn.param = "fc1.w"}, %[[G:.+]]: tensor<16x64xf32>)
// CHECK:         %[[P0:.+]] = nn.sgd %[[P]], %[[G]] lr = 1.000000e-01 : tensor<16x64xf32>
// CHECK:         %[[P1:.+]] = nn.sgd %[[P]], %[[G]] lr = 1.000000e-01 {weight_decay = 0.00999999977 : f32} : tensor<16x64xf32>
// CHECK:         return %[[P0]], %[[P1]]
func.func @sgd(%p: tensor<16x64xf32> {nn.param = "fc1.w"}, %g: tensor<16x64xf32>)
    -> (tensor<16x64xf32>, tensor<16x64xf32>) {
  %0 = nn.sgd %p, %g lr = 1.0e-01 : tensor<16x64xf32>
  %1 = nn.sgd %p, %g lr = 1.0e-01 {weight_decay = 1.0e-02 : f32} : tensor<16x64xf32>
  return %0, %1 : tensor<16x64xf32>, tensor<16x64xf32>
}

// -----

// Tests that adamw round-trips with default hyperparameters and an i32 step.
// CHECK-LABEL: func.func @adamw(
// CHECK-SAME:      %[[P:.+]]: tensor<16x64xf32>, %[[G:.+]]: tensor<16x64xf32>, %[[M:.+]]: tensor<16x64xf32>, %[[V:.+]]: tensor<16x64xf32>, %[[T:.+]]: tensor<i32>)
// CHECK:         %[[P2:.+]], %[[M2:.+]], %[[V2:.+]] = nn.adamw %[[P]], %[[G]], %[[M]], %[[V]], %[[T]] lr = 1.000000e-03 : tensor<16x64xf32>, tensor<16x64xf32>, tensor<i32>
// CHECK:         return %[[P2]], %[[M2]], %[[V2]]
func.func @adamw(%p: tensor<16x64xf32>, %g: tensor<16x64xf32>, %m: tensor<16x64xf32>,
                 %v: tensor<16x64xf32>, %t: tensor<i32>)
    -> (tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) {
  %p2, %m2, %v2 = nn.adamw %p, %g, %m, %v, %t lr = 1.0e-03
      : tensor<16x64xf32>, tensor<16x64xf32>, tensor<i32>
  return %p2, %m2, %v2 : tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
}

// -----

// Tests that adamw round-trips with f32 moments for bf16 weights and explicit
// hyperparameters.
// CHECK-LABEL: func.func @adamw_mixed(
// CHECK-SAME:      %[[P:.+]]: tensor<16x64xbf16>, %[[G:.+]]: tensor<16x64xbf16>, %[[M:.+]]: tensor<16x64xf32>, %[[V:.+]]: tensor<16x64xf32>, %[[T:.+]]: tensor<i64>)
// CHECK:         %[[P2:.+]], %[[M2:.+]], %[[V2:.+]] = nn.adamw %[[P]], %[[G]], %[[M]], %[[V]], %[[T]] lr = 1.000000e-03 {beta1 = 8.000000e-01 : f32, beta2 = 0.949999988 : f32, epsilon = 9.99999997E-7 : f32, weight_decay = 1.000000e-01 : f32} : tensor<16x64xbf16>, tensor<16x64xf32>, tensor<i64>
// CHECK:         return %[[P2]], %[[M2]], %[[V2]] : tensor<16x64xbf16>, tensor<16x64xf32>, tensor<16x64xf32>
func.func @adamw_mixed(%p: tensor<16x64xbf16>, %g: tensor<16x64xbf16>, %m: tensor<16x64xf32>,
                       %v: tensor<16x64xf32>, %t: tensor<i64>)
    -> (tensor<16x64xbf16>, tensor<16x64xf32>, tensor<16x64xf32>) {
  %p2, %m2, %v2 = nn.adamw %p, %g, %m, %v, %t lr = 1.0e-03
      {beta1 = 0.8 : f32, beta2 = 0.95 : f32, epsilon = 1.0e-06 : f32, weight_decay = 0.1 : f32}
      : tensor<16x64xbf16>, tensor<16x64xf32>, tensor<i64>
  return %p2, %m2, %v2 : tensor<16x64xbf16>, tensor<16x64xf32>, tensor<16x64xf32>
}

// -----

// Tests that adamw round-trips a schedule and a clipped gradient.
// CHECK-LABEL: func.func @adamw_clipped(
// CHECK:         nn.adamw %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} norm %{{.+}} lr = 1.000000e-03 {decay_steps = 100 : i64, max_grad_norm = 1.000000e+00 : f32, schedule = 2 : i32, warmup_steps = 10 : i64} : tensor<16x64xf32>, tensor<16x64xf32>, tensor<i64> norm tensor<f32>
// CHECK:         nn.sum_squares %{{.+}} : tensor<16x64xbf16>
func.func @adamw_clipped(%p: tensor<16x64xf32>, %g: tensor<16x64xf32>, %m: tensor<16x64xf32>,
                         %v: tensor<16x64xf32>, %t: tensor<i64>, %n: tensor<f32>,
                         %h: tensor<16x64xbf16>) -> (tensor<16x64xf32>, tensor<f32>) {
  %p2, %m2, %v2 = nn.adamw %p, %g, %m, %v, %t norm %n lr = 1.0e-03
      {schedule = 2 : i32, warmup_steps = 10, decay_steps = 100, max_grad_norm = 1.0 : f32}
      : tensor<16x64xf32>, tensor<16x64xf32>, tensor<i64> norm tensor<f32>
  %s = nn.sum_squares %h : tensor<16x64xbf16>
  return %p2, %s : tensor<16x64xf32>, tensor<f32>
}

// -----

// Tests that adamw round-trips an f32 master weight's update from a bf16
// gradient (mixed precision), whose type it prints.
// CHECK-LABEL: func.func @adamw_master(
// CHECK:         nn.adamw %{{.+}} lr = 1.000000e-03 : tensor<16x64xf32>, tensor<16x64xf32>, tensor<i64> grad tensor<16x64xbf16>
func.func @adamw_master(%p: tensor<16x64xf32>, %g: tensor<16x64xbf16>, %m: tensor<16x64xf32>,
                        %v: tensor<16x64xf32>, %t: tensor<i64>)
    -> (tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) {
  %p2, %m2, %v2 = nn.adamw %p, %g, %m, %v, %t lr = 1.0e-03
      : tensor<16x64xf32>, tensor<16x64xf32>, tensor<i64> grad tensor<16x64xbf16>
  return %p2, %m2, %v2 : tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
}

// -----

// Tests that the backward helpers one_hot and embedding_grad round-trip.
// CHECK-LABEL: func.func @backward_helpers
func.func @backward_helpers(%labels: tensor<2x8xi32>, %dy: tensor<2x8x64xf32>) -> (tensor<2x8x512xf32>, tensor<512x64xf32>) {
  // CHECK: nn.one_hot %{{.+}} : tensor<2x8xi32> -> tensor<2x8x512xf32>
  %h = nn.one_hot %labels : tensor<2x8xi32> -> tensor<2x8x512xf32>
  // CHECK: nn.embedding_grad %{{.+}}, %{{.+}} vocab = 512 : tensor<2x8x64xf32>, tensor<2x8xi32>
  %g = nn.embedding_grad %dy, %labels vocab = 512 : tensor<2x8x64xf32>, tensor<2x8xi32>
  return %h, %g : tensor<2x8x512xf32>, tensor<512x64xf32>
}

// -----

// Tests that fused attention and its gradient round-trip, causal with GQA
// and not.
// CHECK-LABEL: func.func @attention(
// CHECK:         %[[O:.+]] = nn.attention %{{.+}}, %{{.+}}, %{{.+}} causal = true scale = 1.250000e-01 : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>) -> tensor<2x8x16x64xf32>
// CHECK:         nn.attention %{{.+}}, %{{.+}}, %{{.+}} scale = 5.000000e-01 :
// CHECK:         nn.attention_grad %{{.+}}, %{{.+}}, %{{.+}}, %[[O]], %{{.+}} causal = true scale = 1.250000e-01 :
func.func @attention(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>, %v: tensor<2x2x16x64xf32>, %do: tensor<2x8x16x64xf32>) -> (tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>) {
  %o = nn.attention %q, %k, %v causal = true scale = 0.125 : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>) -> tensor<2x8x16x64xf32>
  %p = nn.attention %q, %k, %v scale = 0.5 : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>) -> tensor<2x8x16x64xf32>
  %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %do causal = true scale = 0.125 : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>) -> (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>)
  return %o, %p, %dq : tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>
}

// -----

// Tests that attention in zigzag order and ring blocks of it round-trip.
// CHECK-LABEL: func.func @zigzag(
// CHECK:         %[[O:.+]] = nn.attention %{{.+}}, %{{.+}}, %{{.+}} causal = true scale = 1.250000e-01 ring = true zigzag = 2 :
// CHECK:         nn.attention_grad %{{.+}}, %{{.+}}, %{{.+}}, %[[O]], %{{.+}} causal = true scale = 1.250000e-01 ring = true zigzag = 2 :
// CHECK:         nn.attention_block %{{.+}}, %{{.+}}, %{{.+}} index %{{.+}} causal = true scale = 1.250000e-01 ring_step = 1 ring_size = 2 zigzag = 2 :
// CHECK:         nn.attention_block_grad %{{.+}} index %{{.+}} causal = true scale = 1.250000e-01 ring_step = 1 ring_size = 2 zigzag = 2 :
func.func @zigzag(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>, %do: tensor<2x8x16x64xf32>, %i: tensor<1xi64>, %lse: tensor<2x8x16xf32>) -> (tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>) {
  %o = nn.attention %q, %k, %k causal = true scale = 0.125 ring = true zigzag = 2 : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>) -> tensor<2x8x16x64xf32>
  %dq, %dk, %dv = nn.attention_grad %q, %k, %k, %o, %do causal = true scale = 0.125 ring = true zigzag = 2 : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>) -> (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>)
  %b, %l = nn.attention_block %q, %k, %k index %i causal = true scale = 0.125 ring_step = 1 ring_size = 2 zigzag = 2 : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>, tensor<1xi64>) -> (tensor<2x8x16x64xf32>, tensor<2x8x16xf32>)
  %bq, %bk, %bv = nn.attention_block_grad %q, %k, %k, %o, %do, %lse index %i causal = true scale = 0.125 ring_step = 1 ring_size = 2 zigzag = 2 : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>, tensor<2x8x16xf32>, tensor<1xi64>) -> (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x64xf32>)
  return %dq, %b, %bq : tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>, tensor<2x8x16x64xf32>
}

// -----

// Tests that gather, scatter_add and top_k round-trip.
// CHECK-LABEL: func.func @indexed(
// CHECK:         %[[G:.+]] = nn.gather %{{.+}}, %{{.+}} axis = 1 : (tensor<4x10xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
// CHECK:         nn.scatter_add %[[G]], %{{.+}} axis = 1 : (tensor<4x3xf32>, tensor<4x3xi64>) -> tensor<4x10xf32>
// CHECK:         nn.top_k %{{.+}} k = 2 : tensor<4x10xf32> -> (tensor<4x2xf32>, tensor<4x2xi64>)
func.func @indexed(%x: tensor<4x10xf32>, %i: tensor<4x3xi64>) -> (tensor<4x10xf32>, tensor<4x2xi64>) {
  %g = nn.gather %x, %i axis = 1 : (tensor<4x10xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
  %s = nn.scatter_add %g, %i axis = 1 : (tensor<4x3xf32>, tensor<4x3xi64>) -> tensor<4x10xf32>
  %v, %k = nn.top_k %s k = 2 : tensor<4x10xf32> -> (tensor<4x2xf32>, tensor<4x2xi64>)
  return %s, %k : tensor<4x10xf32>, tensor<4x2xi64>
}

// -----

// Tests that moe_dispatch round-trips.
// CHECK-LABEL: func.func @moe_dispatch(
// CHECK:         nn.moe_dispatch %{{.+}} : tensor<2x16x2xi64> -> tensor<2x16x4x10xf32>
func.func @moe_dispatch(%i: tensor<2x16x2xi64>) -> tensor<2x16x4x10xf32> {
  %m = nn.moe_dispatch %i : tensor<2x16x2xi64> -> tensor<2x16x4x10xf32>
  return %m : tensor<2x16x4x10xf32>
}

// -----

// Tests that the random ops round-trip, whole and on a device's piece.
// CHECK-LABEL: func.func @random(
// CHECK-SAME:      %[[X:.+]]: tensor<4x8xf32>, %[[S:.+]]: tensor<i64>, %[[P:.+]]: tensor<2xi64>)
// CHECK:         %[[U:.+]] = nn.random_uniform step %[[S]] seed = 3 : tensor<i64> -> tensor<4x8xf32>
// CHECK:         %[[V:.+]] = nn.random_uniform step %[[S]] piece %[[P]] seed = 3 {global_shape = array<i64: 8, 8>} : tensor<i64>, tensor<2xi64> -> tensor<4x8xf32>
// CHECK:         %[[D:.+]] = nn.dropout %[[X]] step %[[S]] rate = 1.000000e-01 seed = 7 : tensor<4x8xf32>, tensor<i64>
// CHECK:         %[[E:.+]] = nn.dropout %[[X]] step %[[S]] piece %[[P]] rate = 1.000000e-01 seed = 7 {global_shape = array<i64: 4, 16>} : tensor<4x8xf32>, tensor<i64>, tensor<2xi64>
func.func @random(%x: tensor<4x8xf32>, %step: tensor<i64>, %piece: tensor<2xi64>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %u = nn.random_uniform step %step seed = 3 : tensor<i64> -> tensor<4x8xf32>
  %v = nn.random_uniform step %step piece %piece seed = 3 {global_shape = array<i64: 8, 8>}
      : tensor<i64>, tensor<2xi64> -> tensor<4x8xf32>
  %d = nn.dropout %x step %step rate = 0.1 seed = 7 : tensor<4x8xf32>, tensor<i64>
  %e = nn.dropout %x step %step piece %piece rate = 0.1 seed = 7 {global_shape = array<i64: 4, 16>}
      : tensor<4x8xf32>, tensor<i64>, tensor<2xi64>
  return %u, %v, %d, %e : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that attention's dropout round-trips, whole and on a piece.
// CHECK-LABEL: func.func @attention_dropout(
// CHECK:         nn.attention %{{.+}}, %{{.+}}, %{{.+}} step %{{.+}} causal = true scale = 2.500000e-01 dropout = 1.000000e-01 seed = 4 :
// CHECK:         nn.attention %{{.+}}, %{{.+}}, %{{.+}} step %{{.+}} piece %{{.+}} scale = 2.500000e-01 dropout = 1.000000e-01 {global_shape = array<i64: 4, 4, 8, 8>} :
func.func @attention_dropout(%q: tensor<2x4x8x16xf32>, %kv: tensor<2x2x8x16xf32>,
                             %step: tensor<i64>, %piece: tensor<4xi64>)
    -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) {
  %a = nn.attention %q, %kv, %kv step %step causal = true scale = 0.25 dropout = 0.1 seed = 4
      : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<i64>) -> tensor<2x4x8x16xf32>
  %b = nn.attention %q, %kv, %kv step %step piece %piece scale = 0.25 dropout = 0.1 {global_shape = array<i64: 4, 4, 8, 8>}
      : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<i64>, tensor<4xi64>) -> tensor<2x4x8x16xf32>
  return %a, %b : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
}

// -----

// Tests that a fused op round-trips with its body.
// CHECK-LABEL: func.func @fused(
// CHECK:         %[[F:.+]]:2 = nn.fused(%{{.+}}, %{{.+}}) : (tensor<8x64xf32>, tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xi1>) {
// CHECK-NEXT:    ^bb0(%[[X:.+]]: tensor<8x64xf32>, %[[B:.+]]: tensor<64xf32>):
// CHECK-NEXT:      %[[BB:.+]] = nn.broadcast %[[B]] dims = [1]
// CHECK-NEXT:      %[[H:.+]] = nn.add %[[X]], %[[BB]]
// CHECK-NEXT:      %[[C:.+]] = nn.compare gt, %[[H]], %[[X]]
// CHECK-NEXT:      nn.yield %[[H]], %[[C]] : tensor<8x64xf32>, tensor<8x64xi1>
func.func @fused(%x: tensor<8x64xf32>, %b: tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xi1>) {
  %0:2 = nn.fused(%x, %b) : (tensor<8x64xf32>, tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xi1>) {
  ^bb0(%a: tensor<8x64xf32>, %c: tensor<64xf32>):
    %bb = nn.broadcast %c dims = [1] : tensor<64xf32> -> tensor<8x64xf32>
    %h = nn.add %a, %bb : tensor<8x64xf32>
    %g = nn.compare gt, %h, %a : tensor<8x64xf32>
    nn.yield %h, %g : tensor<8x64xf32>, tensor<8x64xi1>
  }
  return %0#0, %0#1 : tensor<8x64xf32>, tensor<8x64xi1>
}
