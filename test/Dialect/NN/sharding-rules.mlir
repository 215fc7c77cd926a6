// RUN: tessera-opt %s -split-input-file --tessera-test-op-interfaces -verify-diagnostics

// Tests that a dot shares its free dims with the result and reduces the contracting dim.
func.func @dot(%x: tensor<8x16xf32>, %w: tensor<16x64xf32>) -> tensor<8x64xf32> {
  // expected-remark @+2 {{sharding rule: ([i, k], [k, j]) -> ([i, j]) {i=8, j=64, k=16} reduction={k}}}
  // expected-remark @+1 {{cost: flops=16384 bytes=6656}}
  %0 = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----

// Tests that batching dims are factors of both operands and the result.
func.func @dot_batched(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x6x16xf32>) -> tensor<2x4x8x6xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j, k, m], [i, j, l, m]) -> ([i, j, k, l]) {i=2, j=4, k=8, l=6, m=16} reduction={m}}}
  // expected-remark @+1 {{cost: flops=12288 bytes=8704}}
  %0 = nn.dot %q, %k batching_dims = [0, 1] x [0, 1] contracting_dims = [3] x [3] : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>) -> tensor<2x4x8x6xf32>
  return %0 : tensor<2x4x8x6xf32>
}

// -----

// Tests that elementwise ops share every factor.
func.func @add(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=384}}
  %0 = nn.add %a, %a : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that the condition of a select shares the factors of its values.
func.func @select(%c: tensor<4x8xi1>, %a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j], [i, j], [i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=0 bytes=416}}
  %0 = nn.select %c, %a, %a : tensor<4x8xi1>, tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a constant has only result factors.
func.func @constant() -> tensor<4x8xf32> {
  // expected-remark @+2 {{sharding rule: () -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=0 bytes=128}}
  %0 = nn.constant dense<1.0> : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that iota has only result factors and moves its result's bytes.
func.func @iota() -> tensor<4x8xf32> {
  // expected-remark @+2 {{sharding rule: () -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=0 bytes=128}}
  %0 = nn.iota dim = 1 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that an expanded size-1 dim and new dims get factors of their own.
func.func @broadcast(%b: tensor<1x64xf32>) -> tensor<2x8x64xf32> {
  // expected-remark @+2 {{sharding rule: ([j, l]) -> ([i, k, l]) {i=2, j=1, k=8, l=64}}}
  // expected-remark @+1 {{cost: flops=0 bytes=4352}}
  %0 = nn.broadcast %b dims = [1, 2] : tensor<1x64xf32> -> tensor<2x8x64xf32>
  return %0 : tensor<2x8x64xf32>
}

// -----

// Tests that reduced dims are reduction factors.
func.func @reduce(%x: tensor<4x8x16xf32>) -> tensor<8xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j, k]) -> ([j]) {i=4, j=8, k=16} reduction={i, k}}}
  // expected-remark @+1 {{cost: flops=512 bytes=2080}}
  %0 = nn.reduce_sum %x dims = [0, 2] : tensor<4x8x16xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that splitting the hidden dim into heads shares the major factor.
func.func @reshape(%x: tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j, kl]) -> ([i, j, k, l]) {i=2, j=8, k=4, l=16}}}
  // expected-remark @+1 {{cost: flops=0 bytes=8192}}
  %0 = nn.reshape %x : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  return %0 : tensor<2x8x4x16xf32>
}

// -----

// Tests that a transpose permutes its factors.
func.func @transpose(%x: tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j, k, l]) -> ([i, k, j, l]) {i=2, j=8, k=4, l=16}}}
  // expected-remark @+1 {{cost: flops=0 bytes=8192}}
  %0 = nn.transpose %x permutation = [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  return %0 : tensor<2x4x8x16xf32>
}

// -----

// Tests that a sliced dim cannot be split and an unsliced one passes through.
func.func @slice(%x: tensor<8x192xf32>) -> tensor<8x64xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, k]) {i=8, j=192, k=64} need_replication={j, k}}}
  // expected-remark @+1 {{cost: flops=0 bytes=8192}}
  %0 = nn.slice %x start = [0, 64] limit = [8, 128] : tensor<8x192xf32> -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----

// Tests that the concatenated dim cannot be split.
func.func @concat(%a: tensor<4x8xf32>, %b: tensor<4x16xf32>) -> tensor<4x24xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j], [i, k]) -> ([i, l]) {i=4, j=8, k=16, l=24} need_replication={j, k, l}}}
  // expected-remark @+1 {{cost: flops=0 bytes=768}}
  %0 = nn.concat %a, %b dim = 1 : tensor<4x8xf32>, tensor<4x16xf32> -> tensor<4x24xf32>
  return %0 : tensor<4x24xf32>
}

// -----

// Tests that the softmax dim cannot be split.
func.func @softmax(%x: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j, k, l]) -> ([i, j, k, l]) {i=2, j=4, k=8, l=8} need_replication={l}}}
  // expected-remark @+1 {{cost: flops=2560 bytes=4096}}
  %0 = nn.softmax %x dim = 3 : tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x8x8xf32>
}

// -----

// Tests that a causal softmax splits neither queries nor keys, as the mask.
func.func @softmax_causal(%x: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j, k, l]) -> ([i, j, k, l]) {i=2, j=4, k=8, l=8} need_replication={k, l}}}
  // expected-remark @+1 {{cost: flops=2560 bytes=4096}}
  %0 = nn.softmax %x dim = 3 scale = 0.5 causal = true : tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x8x8xf32>
}

// -----

// Tests that the normalized dim is shared with gamma and beta and cannot be split.
func.func @layer_norm(%x: tensor<2x8x64xf32>, %g: tensor<64xf32>) -> tensor<2x8x64xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j, k], [k], [k]) -> ([i, j, k]) {i=2, j=8, k=64} need_replication={k}}}
  // expected-remark @+1 {{cost: flops=7168 bytes=8704}}
  %0 = nn.layer_norm %x, %g, %g : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
  return %0 : tensor<2x8x64xf32>
}

// -----

// Tests that the fused norm gradient lays out the result gradient and both
// results as the input, and keeps the normalized dim whole.
func.func @layer_norm_grad(%x: tensor<2x8x64xf32>, %g: tensor<64xf32>) -> tensor<2x8x64xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j, k], [k], [i, j, k]) -> ([i, j, k], [i, j, k]) {i=2, j=8, k=64} need_replication={k}}}
  // expected-remark @+1 {{cost: flops=14336 bytes=16640}}
  %dx, %xhat = nn.layer_norm_grad %x, %g, %x : tensor<2x8x64xf32>, tensor<64xf32>, tensor<2x8x64xf32>
  return %dx : tensor<2x8x64xf32>
}

// -----

// Tests that the vocab dim of an embedding table is a reduction (partial sums).
func.func @embedding(%t: tensor<512x64xf32>, %i: tensor<2x8xi32>) -> tensor<2x8x64xf32> {
  // expected-remark @+2 {{sharding rule: ([l, k], [i, j]) -> ([i, j, k]) {i=2, j=8, k=64, l=512} reduction={l}}}
  // expected-remark @+1 {{cost: flops=0 bytes=8256}}
  %0 = nn.embedding %t, %i : tensor<512x64xf32>, tensor<2x8xi32>
  return %0 : tensor<2x8x64xf32>
}

// -----

// Tests that the class dim of cross-entropy cannot be split.
func.func @cross_entropy(%l: tensor<2x8x512xf32>, %y: tensor<2x8xi32>) -> tensor<2x8xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j, k], [i, j]) -> ([i, j]) {i=2, j=8, k=512} need_replication={k}}}
  // expected-remark @+1 {{cost: flops=32800 bytes=32896}}
  %0 = nn.cross_entropy %l, %y : tensor<2x8x512xf32>, tensor<2x8xi32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that the query and key dims of the causal mask cannot be split.
func.func @causal_mask(%s: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j, k, l]) -> ([i, j, k, l]) {i=2, j=4, k=8, l=8} need_replication={k, l}}}
  // expected-remark @+1 {{cost: flops=0 bytes=4096}}
  %0 = nn.causal_mask %s : tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x8x8xf32>
}

// -----

// Tests that adamw shares every factor of the parameter, gradient and moments.
func.func @adamw(%p: tensor<16x4xf32>, %m: tensor<16x4xf32>, %t: tensor<i64>) -> tensor<16x4xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j], [i, j], [i, j], [i, j], []) -> ([i, j], [i, j], [i, j]) {i=16, j=4}}}
  // expected-remark @+1 {{cost: flops=1024 bytes=1800}}
  %0, %1, %2 = nn.adamw %p, %p, %m, %m, %t lr = 1.0e-03 : tensor<16x4xf32>, tensor<16x4xf32>, tensor<i64>
  return %0 : tensor<16x4xf32>
}

// -----

// Tests that every elementwise op shares all factors and counts its formula's FLOPs.
func.func @elementwise(%a: tensor<4x8xf32>) -> tensor<4x8xbf16> {
  // expected-remark @+2 {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=384}}
  %0 = nn.sub %a, %a : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=384}}
  %1 = nn.mul %0, %a : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=384}}
  %2 = nn.div %1, %a : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=384}}
  %max = nn.max %1, %a : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=384}}
  %min = nn.min %1, %a : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=384}}
  %pow = nn.pow %1, %a : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=64 bytes=256}}
  %clamp = nn.clamp %1 min = 0.0 max = 1.0 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=256}}
  %3 = nn.neg %2 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=256}}
  %4 = nn.exp %3 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=256}}
  %5 = nn.log %4 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=256}}
  %6 = nn.sqrt %5 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=256}}
  %7 = nn.rsqrt %6 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=256}}
  %8 = nn.tanh %7 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=256}}
  %sin = nn.sin %8 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=256}}
  %cos = nn.cos %8 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=256}}
  %erf = nn.erf %8 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=96 bytes=256}}
  %sigmoid = nn.sigmoid %8 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=256}}
  %abs = nn.abs %8 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=256}}
  %9 = nn.relu %8 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=288 bytes=256}}
  %10 = nn.gelu %9 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=128 bytes=256}}
  %11 = nn.silu %10 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=32 bytes=288}}
  %12 = nn.compare lt, %11, %a : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=0 bytes=192}}
  %13 = nn.cast %11 : tensor<4x8xf32> to tensor<4x8xbf16>
  return %13 : tensor<4x8xbf16>
}

// -----

// Tests that max and mean reductions, log_softmax, rms_norm and sgd have their rules.
func.func @reductions_and_norms(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i]) {i=4, j=8} reduction={j}}}
  // expected-remark @+1 {{cost: flops=32 bytes=144}}
  %0 = nn.reduce_max %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([]) {i=4, j=8} reduction={i, j}}}
  // expected-remark @+1 {{cost: flops=33 bytes=132}}
  %1 = nn.reduce_mean %x dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j]) {i=4, j=8} need_replication={i}}}
  // expected-remark @+1 {{cost: flops=160 bytes=256}}
  %2 = nn.log_softmax %x dim = 0 : tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j], [j]) -> ([i, j]) {i=4, j=8} need_replication={j}}}
  // expected-remark @+1 {{cost: flops=128 bytes=288}}
  %3 = nn.rms_norm %2, %g : tensor<4x8xf32>, tensor<8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=64 bytes=384}}
  %4 = nn.sgd %3, %x lr = 1.0e-01 : tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}

// -----

// Tests that one_hot's depth and embedding_grad's vocab split freely (a
// device's piece is placed by its piece index), and that embedding_grad
// sums over the positions.
func.func @backward_helpers(%labels: tensor<2x8xi32>, %dy: tensor<2x8x64xf32>) -> (tensor<2x8x512xf32>, tensor<512x64xf32>) {
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, j, k]) {i=2, j=8, k=512}}}
  // expected-remark @+1 {{cost: flops=0 bytes=32832}}
  %h = nn.one_hot %labels : tensor<2x8xi32> -> tensor<2x8x512xf32>
  // expected-remark @+2 {{sharding rule: ([i, j, k], [i, j]) -> ([l, k]) {i=2, j=8, k=64, l=512} reduction={i, j}}}
  // expected-remark @+1 {{cost: flops=1024 bytes=135232}}
  %g = nn.embedding_grad %dy, %labels vocab = 512 : tensor<2x8x64xf32>, tensor<2x8xi32>
  return %h, %g : tensor<2x8x512xf32>, tensor<512x64xf32>
}

// -----

// Tests that on a device's piece, the piece index is whole.
func.func @offset_pieces(%labels: tensor<2x8xi32>, %piece: tensor<1xi64>, %t: tensor<256x64xf32>) -> (tensor<2x8x256xf32>, tensor<2x8x64xf32>) {
  // expected-remark @+2 {{sharding rule: ([i, j], [l]) -> ([i, j, k]) {i=2, j=8, k=256, l=1} need_replication={l}}}
  // expected-remark @+1 {{cost: flops=0 bytes=16456}}
  %h = nn.one_hot %labels piece %piece : tensor<2x8xi32>, tensor<1xi64> -> tensor<2x8x256xf32>
  // expected-remark @+2 {{sharding rule: ([l, k], [i, j], [m]) -> ([i, j, k]) {i=2, j=8, k=64, l=256, m=1} reduction={l} need_replication={m}}}
  // expected-remark @+1 {{cost: flops=0 bytes=8256}}
  %e = nn.embedding %t, %labels piece %piece : tensor<256x64xf32>, tensor<2x8xi32>, tensor<1xi64>
  return %h, %e : tensor<2x8x256xf32>, tensor<2x8x64xf32>
}

// -----

// Tests that causal GQA attention splits the batch, the kv heads, each kv
// head's group of query heads (which read it whole), the queries (a causal
// piece by its place) and dv; the keys and d are needed whole; and that it
// counts only the scores at or before their query (136 of 256 per head):
// 2 x 8 x 136 x (2 x 64 + 2 x 32 + 5).
func.func @attention(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>, %v: tensor<2x2x16x32xf32>) -> tensor<2x8x16x32xf32> {
  // expected-remark @+2 {{sharding rule: ([i, jk, l, n], [i, j, m, n], [i, j, m, o]) -> ([i, jk, l, o]) {i=2, j=2, k=4, l=16, m=16, n=64, o=32} need_replication={m, n}}}
  // expected-remark @+1 {{cost: flops=428672 bytes=122880}}
  %o = nn.attention %q, %k, %v causal = true scale = 0.125 : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x32xf32>) -> tensor<2x8x16x32xf32>
  return %o : tensor<2x8x16x32xf32>
}

// -----

// Tests that attention's gradient splits only the batch and the heads.
func.func @attention_grad(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %o: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j, k, m], [i, j, l, m], [i, j, l, n], [i, j, k, n], [i, j, k, n]) -> ([i, j, k, m], [i, j, l, m], [i, j, l, n]) {i=2, j=4, k=8, l=8, m=16, n=16} reduction={k} need_replication={l, m, n}}}
  // expected-remark @+1 {{cost: flops=102912 bytes=32768}}
  %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %o scale = 0.25 : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
  return %dq : tensor<2x4x8x16xf32>
}

// -----

// Tests that GQA attention's gradient splits the group of query heads as a
// reduction that dq keeps: dk and dv sum over it.
func.func @gqa_grad(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %o: tensor<2x4x8x16xf32>) -> tensor<2x2x8x16xf32> {
  // expected-remark @+2 {{sharding rule: ([i, jk, l, n], [i, j, m, n], [i, j, m, o], [i, jk, l, o], [i, jk, l, o]) -> ([i, jk, l, n], [i, j, m, n], [i, j, m, o]) {i=2, j=2, k=2, l=8, m=8, n=16, o=16} reduction={k, l} need_replication={m, n, o}}}
  // expected-remark @+1 {{cost:}}
  %dq, %dk, %dv = nn.attention_grad %q, %k, %k, %o, %o scale = 0.25 : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  return %dk : tensor<2x2x8x16xf32>
}

// -----

// Tests that gather splits the dims but its axis, where the input is needed
// whole and the indices split; scatter_add's sources along its axis are
// partial sums of the whole result; top_k needs whole rows.
func.func @indexed(%x: tensor<4x10xf32>, %i: tensor<4x3xi64>) -> tensor<4x2xi64> {
  // expected-remark @+2 {{sharding rule: ([i, j], [i, k]) -> ([i, k]) {i=4, j=10, k=3} need_replication={j}}}
  // expected-remark @+1 {{cost: flops=0 bytes=304}}
  %g = nn.gather %x, %i axis = 1 : (tensor<4x10xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
  // expected-remark @+2 {{sharding rule: ([i, j], [i, j]) -> ([i, k]) {i=4, j=3, k=10} reduction={j} need_replication={k}}}
  // expected-remark @+1 {{cost: flops=12 bytes=304}}
  %s = nn.scatter_add %g, %i axis = 1 : (tensor<4x3xf32>, tensor<4x3xi64>) -> tensor<4x10xf32>
  // expected-remark @+2 {{sharding rule: ([i, j]) -> ([i, k], [i, k]) {i=4, j=10, k=2} need_replication={j, k}}}
  // expected-remark @+1 {{cost: flops=80 bytes=256}}
  %v, %k = nn.top_k %s k = 2 : tensor<4x10xf32> -> (tensor<4x2xf32>, tensor<4x2xi64>)
  return %k : tensor<4x2xi64>
}

// -----

// Tests that moe_dispatch splits the groups only: an expert's slots are counted
// over every token and choice of a group.
func.func @moe_dispatch(%i: tensor<2x16x2xi64>) -> tensor<2x16x4x10xf32> {
  // expected-remark @+2 {{sharding rule: ([i, j, k]) -> ([i, j, l, m]) {i=2, j=16, k=2, l=4, m=10} need_replication={j, k, l, m}}}
  // expected-remark @+1 {{cost: flops=64 bytes=5632}}
  %m = nn.moe_dispatch %i : tensor<2x16x2xi64> -> tensor<2x16x4x10xf32>
  return %m : tensor<2x16x4x10xf32>
}

// -----

// Tests that the random ops split every dim (the step whole) and cost their generator.
func.func @random(%x: tensor<4x8xf32>, %step: tensor<i64>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // expected-remark @+2 {{sharding rule: ([]) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=512 bytes=136}}
  %u = nn.random_uniform step %step seed = 0 : tensor<i64> -> tensor<4x8xf32>
  // expected-remark @+2 {{sharding rule: ([i, j], []) -> ([i, j]) {i=4, j=8}}}
  // expected-remark @+1 {{cost: flops=576 bytes=264}}
  %d = nn.dropout %x step %step rate = 0.5 seed = 1 : tensor<4x8xf32>, tensor<i64>
  return %u, %d : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that attention's dropout step is whole and its draw is priced.
func.func @attention_dropout(%q: tensor<2x8x16x64xf32>, %k: tensor<2x2x16x64xf32>, %v: tensor<2x2x16x32xf32>, %step: tensor<i64>) -> tensor<2x8x16x32xf32> {
  // expected-remark @+2 {{sharding rule: ([i, jk, l, n], [i, j, m, n], [i, j, m, o], []) -> ([i, jk, l, o]) {i=2, j=2, k=4, l=16, m=16, n=64, o=32} need_replication={m, n}}}
  // expected-remark @+1 {{cost: flops=467840 bytes=122888}}
  %o = nn.attention %q, %k, %v step %step causal = true scale = 0.125 dropout = 0.1 : (tensor<2x8x16x64xf32>, tensor<2x2x16x64xf32>, tensor<2x2x16x32xf32>, tensor<i64>) -> tensor<2x8x16x32xf32>
  return %o : tensor<2x8x16x32xf32>
}
