// RUN: tessera-opt %s -split-input-file -verify-diagnostics

// Ops whose format spells out the result type infer it while verifying; a
// failed inference there reports the reason and then 'failed to infer returned
// types'. Ops whose format omits it infer it while parsing and report only the
// reason.

// Tests that dot rejects unequal numbers of lhs and rhs batching dims.
func.func @dot_batching_count(%a: tensor<2x4x8xf32>, %b: tensor<2x8x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+2 {{'nn.dot' op has 1 lhs batching dims but 2 rhs batching dims}}
  // expected-error @+1 {{'nn.dot' op failed to infer returned types}}
  %0 = nn.dot %a, %b batching_dims = [0] x [0, 1] contracting_dims = [2] x [1]
      : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// -----

// Tests that dot rejects unequal numbers of lhs and rhs contracting dims.
func.func @dot_contracting_count(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+2 {{'nn.dot' op has 1 lhs contracting dims but 2 rhs contracting dims}}
  // expected-error @+1 {{'nn.dot' op failed to infer returned types}}
  %0 = nn.dot %a, %b contracting_dims = [1] x [0, 1]
      : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that dot rejects an lhs dim outside the lhs rank.
func.func @dot_lhs_dim_range(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+2 {{'nn.dot' op lhs dim 2 is out of range for rank 2}}
  // expected-error @+1 {{'nn.dot' op failed to infer returned types}}
  %0 = nn.dot %a, %b contracting_dims = [2] x [0]
      : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that dot rejects a negative rhs dim.
func.func @dot_rhs_dim_range(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+2 {{'nn.dot' op rhs dim -1 is out of range for rank 2}}
  // expected-error @+1 {{'nn.dot' op failed to infer returned types}}
  %0 = nn.dot %a, %b contracting_dims = [1] x [-1]
      : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that dot rejects a dim that is both batching and contracting.
func.func @dot_dim_twice(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> tensor<8xf32> {
  // expected-error @+2 {{'nn.dot' op lhs dim 0 appears twice}}
  // expected-error @+1 {{'nn.dot' op failed to infer returned types}}
  %0 = nn.dot %a, %b batching_dims = [0] x [0] contracting_dims = [0] x [1]
      : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that dot rejects paired dims of different sizes.
func.func @dot_paired_size(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{'nn.dot' op pairs lhs dim 1 of size 8 with rhs dim 0 of size 16}}
  // expected-error @+1 {{'nn.dot' op failed to infer returned types}}
  %0 = nn.dot %a, %b contracting_dims = [1] x [0]
      : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that dot rejects operands of different element types.
func.func @dot_element_type(%a: tensor<4x8xf32>, %b: tensor<8x16xbf16>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'nn.dot' op expects operands of one element type, got 'f32' and 'bf16'}}
  %0 = nn.dot %a, %b contracting_dims = [1] x [0]
      : (tensor<4x8xf32>, tensor<8x16xbf16>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that dot rejects a result type other than the inferred one.
func.func @dot_result_type(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<16x4xf32> {
  // expected-error @+2 {{'nn.dot' op inferred type(s) 'tensor<4x16xf32>' are incompatible with return type(s) of operation 'tensor<16x4xf32>'}}
  // expected-error @+1 {{'nn.dot' op failed to infer returned types}}
  %0 = nn.dot %a, %b contracting_dims = [1] x [0]
      : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<16x4xf32>
  return %0 : tensor<16x4xf32>
}

// -----

// Tests that the elementwise ops reject integer tensors (an ODS type
// constraint).
func.func @add_integer(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'nn.add' op operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = nn.add %a, %a : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Tests that select rejects a condition of another shape than the values.
func.func @select_condition_shape(%c: tensor<8x4xi1>, %a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.select' op expects a condition of shape [4, 8], got [8, 4]}}
  %0 = nn.select %c, %a, %a : tensor<8x4xi1>, tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that cast rejects a change of shape.
func.func @cast_shape(%x: tensor<4x8xf32>) -> tensor<8x4xbf16> {
  // expected-error @+1 {{'nn.cast' op expects the result shape [4, 8], got [8, 4]}}
  %0 = nn.cast %x : tensor<4x8xf32> to tensor<8x4xbf16>
  return %0 : tensor<8x4xbf16>
}

// -----

// Tests that constant rejects a value that is not a ranked tensor; the error
// comes from type inference while parsing.
func.func @constant_not_tensor() -> vector<4xf32> {
  // expected-error @+1 {{'nn.constant' op expects a value of ranked tensor type}}
  %0 = nn.constant dense<1.0> : vector<4xf32>
  return %0 : vector<4xf32>
}

// -----

// Tests that broadcast rejects a change of element type.
func.func @broadcast_element_type(%x: tensor<64xf32>) -> tensor<8x64xbf16> {
  // expected-error @+1 {{'nn.broadcast' op expects the result element type 'f32', got 'bf16'}}
  %0 = nn.broadcast %x dims = [1] : tensor<64xf32> -> tensor<8x64xbf16>
  return %0 : tensor<8x64xbf16>
}

// -----

// Tests that broadcast needs one dim per operand dim.
func.func @broadcast_dim_count(%x: tensor<64xf32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{'nn.broadcast' op expects one dim per operand dim (1), got 2}}
  %0 = nn.broadcast %x dims = [0, 1] : tensor<64xf32> -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----

// Tests that broadcast rejects a dim outside the result rank.
func.func @broadcast_dim_range(%x: tensor<64xf32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{'nn.broadcast' op dim 2 is out of range for result rank 2}}
  %0 = nn.broadcast %x dims = [2] : tensor<64xf32> -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----

// Tests that broadcast rejects dims that do not increase.
func.func @broadcast_not_increasing(%x: tensor<8x64xf32>) -> tensor<64x8xf32> {
  // expected-error @+1 {{'nn.broadcast' op expects increasing dims, got [1, 0]}}
  %0 = nn.broadcast %x dims = [1, 0] : tensor<8x64xf32> -> tensor<64x8xf32>
  return %0 : tensor<64x8xf32>
}

// -----

// Tests that broadcast rejects an operand size that is neither 1 nor the
// result's size.
func.func @broadcast_size(%x: tensor<32xf32>) -> tensor<8x64xf32> {
  // expected-error @+1 {{'nn.broadcast' op operand dim 0 of size 32 cannot broadcast to size 64 of result dim 1}}
  %0 = nn.broadcast %x dims = [1] : tensor<32xf32> -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----

// Tests that a reduction rejects a dim outside the input rank.
func.func @reduce_dim_range(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'nn.reduce_sum' op dim 2 is out of range for rank 2}}
  // expected-error @+1 {{'nn.reduce_sum' op failed to infer returned types}}
  %0 = nn.reduce_sum %x dims = [2] : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a reduction rejects a dim given twice.
func.func @reduce_dim_twice(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{'nn.reduce_max' op dim 1 appears twice}}
  // expected-error @+1 {{'nn.reduce_max' op failed to infer returned types}}
  %0 = nn.reduce_max %x dims = [1, 1] : tensor<4x8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a reduction rejects a result type other than the inferred one.
func.func @reduce_result_type(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  // expected-error @+2 {{'nn.reduce_mean' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<8xf32>'}}
  // expected-error @+1 {{'nn.reduce_mean' op failed to infer returned types}}
  %0 = nn.reduce_mean %x dims = [1] : tensor<4x8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that reshape rejects a change of element type.
func.func @reshape_element_type(%x: tensor<4x8xf32>) -> tensor<32xf16> {
  // expected-error @+1 {{'nn.reshape' op expects the result element type 'f32', got 'f16'}}
  %0 = nn.reshape %x : tensor<4x8xf32> -> tensor<32xf16>
  return %0 : tensor<32xf16>
}

// -----

// Tests that nn ops reject dynamic shapes: models have static global shapes.
func.func @reshape_dynamic(%x: tensor<?x8xf32>) -> tensor<8x?xf32> {
  // expected-error @+1 {{'nn.reshape' op operand #0 must be statically shaped tensor}}
  %0 = nn.reshape %x : tensor<?x8xf32> -> tensor<8x?xf32>
  return %0 : tensor<8x?xf32>
}

// -----

// Tests that reshape rejects a change of element count.
func.func @reshape_element_count(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'nn.reshape' op cannot reshape 32 elements into 16}}
  %0 = nn.reshape %x : tensor<4x8xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// Tests that transpose rejects a permutation of the wrong length.
func.func @transpose_length(%x: tensor<2x4x8xf32>) -> tensor<4x2x8xf32> {
  // expected-error @+2 {{'nn.transpose' op expects a permutation of 3 dims, got [1, 0]}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x permutation = [1, 0] : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
  return %0 : tensor<4x2x8xf32>
}

// -----

// Tests that transpose rejects a permutation entry outside the rank.
func.func @transpose_range(%x: tensor<2x4xf32>) -> tensor<4x2xf32> {
  // expected-error @+2 {{'nn.transpose' op permutation entry 2 is out of range for rank 2}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x permutation = [2, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

// Tests that transpose rejects a permutation with a repeated entry.
func.func @transpose_duplicate(%x: tensor<2x4x8xf32>) -> tensor<4x4x8xf32> {
  // expected-error @+2 {{'nn.transpose' op permutation entry 1 appears twice}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x permutation = [1, 1, 2] : tensor<2x4x8xf32> -> tensor<4x4x8xf32>
  return %0 : tensor<4x4x8xf32>
}

// -----

// Tests that slice needs a start and a limit per dim.
func.func @slice_rank(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{'nn.slice' op expects start and limit of rank 2, got 1 and 2}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x start = [0] limit = [4, 4] : tensor<4x8xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// Tests that slice rejects a limit past the dim's size.
func.func @slice_limit(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{'nn.slice' op dim 1 of size 8 cannot be sliced [2, 10)}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x start = [0, 2] limit = [4, 10] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that slice rejects a start past the limit.
func.func @slice_start_after_limit(%x: tensor<4x8xf32>) -> tensor<1x8xf32> {
  // expected-error @+2 {{'nn.slice' op dim 0 of size 4 cannot be sliced [3, 2)}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x start = [3, 0] limit = [2, 8] : tensor<4x8xf32> -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}

// -----

// Tests that slice rejects a negative start.
func.func @slice_negative_start(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{'nn.slice' op dim 0 of size 4 cannot be sliced [-1, 3)}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x start = [-1, 0] limit = [3, 8] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that concat rejects a dim outside the rank.
func.func @concat_dim_range(%a: tensor<4x8xf32>) -> tensor<4x16xf32> {
  // expected-error @+2 {{'nn.concat' op dim 2 is out of range for rank 2}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %a dim = 2 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that concat rejects inputs of different element types.
func.func @concat_element_type(%a: tensor<4x8xf32>, %b: tensor<4x8xbf16>) -> tensor<4x16xf32> {
  // expected-error @+2 {{'nn.concat' op input #1 has element type 'bf16', expected 'f32'}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b dim = 1 : tensor<4x8xf32>, tensor<4x8xbf16> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that concat rejects inputs of different ranks.
func.func @concat_rank(%a: tensor<4x8xf32>, %b: tensor<4x8x1xf32>) -> tensor<8x8xf32> {
  // expected-error @+2 {{'nn.concat' op input #1 has rank 3, expected 2}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b dim = 0 : tensor<4x8xf32>, tensor<4x8x1xf32> -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// Tests that concat rejects inputs whose other dims differ.
func.func @concat_size(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %c: tensor<2x16xf32>) -> tensor<4x32xf32> {
  // expected-error @+2 {{'nn.concat' op input #2 has size 2 in dim 0, expected 4}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b, %c dim = 1 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x16xf32> -> tensor<4x32xf32>
  return %0 : tensor<4x32xf32>
}

// -----

// Tests that concat rejects an empty input list (only writable in generic
// form); type inference fails while verifying.
func.func @concat_empty() -> tensor<4xf32> {
  // expected-error @+2 {{'nn.concat' op expects at least one input}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = "nn.concat"() {dim = 0 : i64} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that softmax rejects a dim outside the rank.
func.func @softmax_dim(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.softmax' op dim 2 is out of range for rank 2}}
  %0 = nn.softmax %x dim = 2 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a causal softmax runs along the keys, the last dim.
func.func @softmax_causal_dim(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.softmax' op with causal = true expects scores [..., query, key] and dim 1 (the keys), got rank 2 and dim 0}}
  %0 = nn.softmax %x dim = 0 causal = true : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a causal softmax needs queries and keys.
func.func @softmax_causal_rank(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'nn.softmax' op with causal = true expects scores [..., query, key] and dim 0 (the keys), got rank 1 and dim 0}}
  %0 = nn.softmax %x dim = 0 causal = true : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that softmax rejects a scale that is not finite.
func.func @softmax_scale(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.softmax' op expects a finite scale, got INF}}
  %0 = nn.softmax %x dim = 1 scale = 0x7F800000 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that log_softmax rejects a negative dim.
func.func @log_softmax_dim(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.log_softmax' op dim -1 is out of range for rank 2}}
  %0 = nn.log_softmax %x dim = -1 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that layer_norm rejects a gamma of another size than the last dim;
// the error comes from type inference while parsing.
func.func @layer_norm_gamma_shape(%x: tensor<2x64xf32>, %g: tensor<32xf32>, %b: tensor<64xf32>) -> tensor<2x64xf32> {
  // expected-error @+1 {{'nn.layer_norm' op expects gamma of shape [64], got [32]}}
  %0 = nn.layer_norm %x, %g, %b : tensor<2x64xf32>, tensor<32xf32>, tensor<64xf32>
  return %0 : tensor<2x64xf32>
}

// -----

// Tests that layer_norm rejects a gamma of another element type than the
// input.
func.func @layer_norm_gamma_element_type(%x: tensor<2x64xbf16>, %g: tensor<64xf32>, %b: tensor<64xbf16>) -> tensor<2x64xbf16> {
  // expected-error @+1 {{'nn.layer_norm' op expects gamma of element type 'bf16', got 'f32'}}
  %0 = nn.layer_norm %x, %g, %b : tensor<2x64xbf16>, tensor<64xf32>, tensor<64xbf16>
  return %0 : tensor<2x64xbf16>
}

// -----

// Tests that layer_norm rejects a beta that is not one-dimensional.
func.func @layer_norm_beta_shape(%x: tensor<2x64xf32>, %g: tensor<64xf32>, %b: tensor<1x64xf32>) -> tensor<2x64xf32> {
  // expected-error @+1 {{'nn.layer_norm' op expects beta of shape [64], got [1, 64]}}
  %0 = nn.layer_norm %x, %g, %b : tensor<2x64xf32>, tensor<64xf32>, tensor<1x64xf32>
  return %0 : tensor<2x64xf32>
}

// -----

// Tests that layer_norm_grad rejects a result gradient of another type than
// the input.
func.func @layer_norm_grad_dy_type(%x: tensor<2x64xf32>, %g: tensor<64xf32>, %dy: tensor<2x32xf32>) -> tensor<2x64xf32> {
  // expected-error @+1 {{'nn.layer_norm_grad' op expects a result gradient of the input's type 'tensor<2x64xf32>', got 'tensor<2x32xf32>'}}
  %dx, %xhat = nn.layer_norm_grad %x, %g, %dy : tensor<2x64xf32>, tensor<64xf32>, tensor<2x32xf32>
  return %dx : tensor<2x64xf32>
}

// -----

// Tests that rms_norm_grad rejects a gamma of another size than the last dim.
func.func @rms_norm_grad_gamma_shape(%x: tensor<2x64xf32>, %g: tensor<32xf32>, %dy: tensor<2x64xf32>) -> tensor<2x64xf32> {
  // expected-error @+1 {{'nn.rms_norm_grad' op expects gamma of shape [64], got [32]}}
  %dx, %xhat = nn.rms_norm_grad %x, %g, %dy : tensor<2x64xf32>, tensor<32xf32>, tensor<2x64xf32>
  return %dx : tensor<2x64xf32>
}

// -----

// Tests that layer_norm rejects a rank-0 input.
func.func @layer_norm_rank0(%x: tensor<f32>, %g: tensor<1xf32>, %b: tensor<1xf32>) -> tensor<f32> {
  // expected-error @+1 {{'nn.layer_norm' op expects an input of rank at least 1}}
  %0 = nn.layer_norm %x, %g, %b : tensor<f32>, tensor<1xf32>, tensor<1xf32>
  return %0 : tensor<f32>
}

// -----

// Tests that layer_norm rejects integer tensors once inference succeeds (an
// ODS type constraint).
func.func @layer_norm_integer(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'nn.layer_norm' op operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = nn.layer_norm %x, %x, %x : tensor<4xi32>, tensor<4xi32>, tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Tests that rms_norm rejects a gamma of another size than the last dim.
func.func @rms_norm_gamma_shape(%x: tensor<2x64xf32>, %g: tensor<2x64xf32>) -> tensor<2x64xf32> {
  // expected-error @+1 {{'nn.rms_norm' op expects gamma of shape [64], got [2, 64]}}
  %0 = nn.rms_norm %x, %g : tensor<2x64xf32>, tensor<2x64xf32>
  return %0 : tensor<2x64xf32>
}

// -----

// Tests that rms_norm rejects a gamma of another element type than the input.
func.func @rms_norm_gamma_element_type(%x: tensor<2x64xf16>, %g: tensor<64xf32>) -> tensor<2x64xf16> {
  // expected-error @+1 {{'nn.rms_norm' op expects gamma of element type 'f16', got 'f32'}}
  %0 = nn.rms_norm %x, %g : tensor<2x64xf16>, tensor<64xf32>
  return %0 : tensor<2x64xf16>
}

// -----

// Tests that rms_norm rejects a rank-0 input.
func.func @rms_norm_rank0(%x: tensor<f32>, %g: tensor<1xf32>) -> tensor<f32> {
  // expected-error @+1 {{'nn.rms_norm' op expects an input of rank at least 1}}
  %0 = nn.rms_norm %x, %g : tensor<f32>, tensor<1xf32>
  return %0 : tensor<f32>
}

// -----

// Tests that embedding rejects a table that is not [vocab, hidden].
func.func @embedding_table_rank(%t: tensor<512xf32>, %i: tensor<2x8xi32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'nn.embedding' op expects a table of rank 2 ([vocab, hidden]), got rank 1}}
  %0 = nn.embedding %t, %i : tensor<512xf32>, tensor<2x8xi32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that embedding rejects float indices (an ODS type constraint).
func.func @embedding_float_indices(%t: tensor<512x64xf32>, %i: tensor<2x8xf32>) -> tensor<2x8x64xf32> {
  // expected-error @+1 {{'nn.embedding' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2x8xf32>'}}
  %0 = nn.embedding %t, %i : tensor<512x64xf32>, tensor<2x8xf32>
  return %0 : tensor<2x8x64xf32>
}

// -----

// Tests that cross_entropy rejects labels that are not the logits' leading
// dims.
func.func @cross_entropy_labels_shape(%l: tensor<2x8x512xf32>, %y: tensor<2x512xi32>) -> tensor<2x512xf32> {
  // expected-error @+1 {{'nn.cross_entropy' op expects labels of shape [2, 8], got [2, 512]}}
  %0 = nn.cross_entropy %l, %y : tensor<2x8x512xf32>, tensor<2x512xi32>
  return %0 : tensor<2x512xf32>
}

// -----

// Tests that cross_entropy rejects rank-0 logits.
func.func @cross_entropy_rank0(%l: tensor<f32>, %y: tensor<i32>) -> tensor<f32> {
  // expected-error @+1 {{'nn.cross_entropy' op expects logits of rank at least 1}}
  %0 = nn.cross_entropy %l, %y : tensor<f32>, tensor<i32>
  return %0 : tensor<f32>
}

// -----

// Tests that causal_mask rejects scores without query and key dims.
func.func @causal_mask_rank(%s: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'nn.causal_mask' op expects scores of rank at least 2 ([..., query, key]), got rank 1}}
  %0 = nn.causal_mask %s : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that sgd rejects a negative learning rate.
func.func @sgd_negative_lr(%p: tensor<16xf32>, %g: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'nn.sgd' op expects lr in [0, inf), got -0.1}}
  %0 = nn.sgd %p, %g lr = -1.0e-01 : tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// Tests that sgd rejects a NaN learning rate.
func.func @sgd_nan_lr(%p: tensor<16xf32>, %g: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'nn.sgd' op expects lr in [0, inf), got NaN}}
  %0 = nn.sgd %p, %g lr = 0x7FC00000 : tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// Tests that sgd rejects a negative weight decay.
func.func @sgd_negative_weight_decay(%p: tensor<16xf32>, %g: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'nn.sgd' op expects weight_decay in [0, inf), got -1}}
  %0 = nn.sgd %p, %g lr = 1.0e-01 {weight_decay = -1.0 : f32} : tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// Tests that adamw rejects moments of another shape than the parameter.
func.func @adamw_moment_shape(%p: tensor<16x64xf32>, %m: tensor<64x16xf32>, %t: tensor<i64>) -> tensor<16x64xf32> {
  // expected-error @+1 {{'nn.adamw' op expects moments of the parameter's shape [16, 64], got [64, 16]}}
  %p2, %m2, %v2 = nn.adamw %p, %p, %m, %m, %t lr = 1.0e-03
      : tensor<16x64xf32>, tensor<64x16xf32>, tensor<i64>
  return %p2 : tensor<16x64xf32>
}

// -----

// Tests that adamw reads a gradient of its parameter's type, or a 16-bit one
// for an f32 master weight only.
func.func @adamw_grad_type(%p: tensor<16x64xbf16>, %g: tensor<16x64xf16>, %m: tensor<16x64xf32>, %t: tensor<i64>) -> tensor<16x64xbf16> {
  // expected-error @+1 {{'nn.adamw' op expects a gradient of the parameter's type, or of its shape in bf16 or f16 for an f32 parameter; got 'tensor<16x64xf16>' for 'tensor<16x64xbf16>'}}
  %p2, %m2, %v2 = nn.adamw %p, %g, %m, %m, %t lr = 1.0e-03
      : tensor<16x64xbf16>, tensor<16x64xf32>, tensor<i64> grad tensor<16x64xf16>
  return %p2 : tensor<16x64xbf16>
}

// -----

func.func @adamw_grad_shape(%p: tensor<16x64xf32>, %g: tensor<64x16xbf16>, %m: tensor<16x64xf32>, %t: tensor<i64>) -> tensor<16x64xf32> {
  // expected-error @+1 {{'nn.adamw' op expects a gradient of the parameter's type, or of its shape in bf16 or f16 for an f32 parameter; got 'tensor<64x16xbf16>' for 'tensor<16x64xf32>'}}
  %p2, %m2, %v2 = nn.adamw %p, %g, %m, %m, %t lr = 1.0e-03
      : tensor<16x64xf32>, tensor<16x64xf32>, tensor<i64> grad tensor<64x16xbf16>
  return %p2 : tensor<16x64xf32>
}

// -----

// Tests that adamw rejects a negative learning rate.
func.func @adamw_lr(%p: tensor<16xf32>, %t: tensor<i64>) -> tensor<16xf32> {
  // expected-error @+1 {{'nn.adamw' op expects lr in [0, inf), got -0.001}}
  %p2, %m2, %v2 = nn.adamw %p, %p, %p, %p, %t lr = -1.0e-03
      : tensor<16xf32>, tensor<16xf32>, tensor<i64>
  return %p2 : tensor<16xf32>
}

// -----

// Tests that adamw rejects beta1 of 1, which would never forget the first
// moment.
func.func @adamw_beta1(%p: tensor<16xf32>, %t: tensor<i64>) -> tensor<16xf32> {
  // expected-error @+1 {{'nn.adamw' op expects beta1 in [0, 1), got 1}}
  %p2, %m2, %v2 = nn.adamw %p, %p, %p, %p, %t lr = 1.0e-03 {beta1 = 1.0 : f32}
      : tensor<16xf32>, tensor<16xf32>, tensor<i64>
  return %p2 : tensor<16xf32>
}

// -----

// Tests that adamw rejects a negative beta2.
func.func @adamw_beta2(%p: tensor<16xf32>, %t: tensor<i64>) -> tensor<16xf32> {
  // expected-error @+1 {{'nn.adamw' op expects beta2 in [0, 1), got -0.5}}
  %p2, %m2, %v2 = nn.adamw %p, %p, %p, %p, %t lr = 1.0e-03 {beta2 = -0.5 : f32}
      : tensor<16xf32>, tensor<16xf32>, tensor<i64>
  return %p2 : tensor<16xf32>
}

// -----

// Tests that adamw rejects a negative epsilon.
func.func @adamw_epsilon(%p: tensor<16xf32>, %t: tensor<i64>) -> tensor<16xf32> {
  // expected-error @+1 {{'nn.adamw' op expects epsilon in [0, inf), got -1}}
  %p2, %m2, %v2 = nn.adamw %p, %p, %p, %p, %t lr = 1.0e-03 {epsilon = -1.0 : f32}
      : tensor<16xf32>, tensor<16xf32>, tensor<i64>
  return %p2 : tensor<16xf32>
}

// -----

// Tests that adamw rejects a negative weight decay.
func.func @adamw_weight_decay(%p: tensor<16xf32>, %t: tensor<i64>) -> tensor<16xf32> {
  // expected-error @+1 {{'nn.adamw' op expects weight_decay in [0, inf), got -1}}
  %p2, %m2, %v2 = nn.adamw %p, %p, %p, %p, %t lr = 1.0e-03 {weight_decay = -1.0 : f32}
      : tensor<16xf32>, tensor<16xf32>, tensor<i64>
  return %p2 : tensor<16xf32>
}

// -----

// Tests that adamw rejects a step that is not a scalar (an ODS type
// constraint).
func.func @adamw_step_rank(%p: tensor<16xf32>, %t: tensor<1xi64>) -> tensor<16xf32> {
  // expected-error @+1 {{'nn.adamw' op operand #4 must be 0D tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<1xi64>'}}
  %p2, %m2, %v2 = nn.adamw %p, %p, %p, %p, %t lr = 1.0e-03
      : tensor<16xf32>, tensor<16xf32>, tensor<1xi64>
  return %p2 : tensor<16xf32>
}

// -----

// Tests that `nn.param` must be a string.
// expected-error @+1 {{expects 'nn.param' of argument #1 to be a non-empty string, got 1 : i64}}
func.func @param_not_string(%x: tensor<4xf32>, %w: tensor<4xf32> {nn.param = 1}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Tests that `nn.param` must not be empty.
// expected-error @+1 {{expects 'nn.param' of argument #0 to be a non-empty string, got ""}}
func.func @param_empty(%w: tensor<4xf32> {nn.param = ""}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// Tests that an argument attribute of the nn dialect other than `nn.param` is
// rejected.
// expected-error @+1 {{unknown nn attribute 'nn.params' on argument #0}}
func.func @unknown_arg_attr(%w: tensor<4xf32> {nn.params = "w"}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// Tests that an infinite learning rate is rejected.
func.func @sgd_inf_lr(%p: tensor<16xf32>, %g: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'nn.sgd' op expects lr in [0, inf), got +Inf}}
  %0 = nn.sgd %p, %g lr = 0x7F800000 : tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// Tests that nn attributes are not allowed on function results.
// expected-error @+1 {{unknown nn attribute 'nn.param' on result #0}}
func.func @param_on_result(%x: tensor<16xf32>) -> (tensor<16xf32> {nn.param = "w"}) {
  return %x : tensor<16xf32>
}

// -----

// Tests that one_hot appends exactly the depth to the labels' shape.
func.func @one_hot_shape(%labels: tensor<2x8xi32>) -> tensor<2x512xf32> {
  // expected-error @+1 {{'nn.one_hot' op expects a result of shape [2, 8] ++ [depth >= 1], got [2, 512]}}
  %h = nn.one_hot %labels : tensor<2x8xi32> -> tensor<2x512xf32>
  return %h : tensor<2x512xf32>
}

// -----

// Tests that embedding_grad takes one gradient row per index.
func.func @embedding_grad_shape(%dy: tensor<2x4x64xf32>, %ids: tensor<2x8xi32>) -> tensor<512x64xf32> {
  // expected-error @+1 {{'nn.embedding_grad' op expects a gradient of shape [2, 8] ++ [hidden], got [2, 4, 64]}}
  %g = nn.embedding_grad %dy, %ids vocab = 512 : tensor<2x4x64xf32>, tensor<2x8xi32>
  return %g : tensor<512x64xf32>
}

// -----

// Tests that embedding_grad needs a vocab.
func.func @embedding_grad_vocab(%dy: tensor<2x8x64xf32>, %ids: tensor<2x8xi32>) -> tensor<0x64xf32> {
  // expected-error @+1 {{'nn.embedding_grad' op expects a vocab of at least 1, got 0}}
  %g = nn.embedding_grad %dy, %ids vocab = 0 : tensor<2x8x64xf32>, tensor<2x8xi32>
  return %g : tensor<0x64xf32>
}

// -----

// Tests that iota rejects a dim outside its result.
func.func @iota_dim() -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.iota' op expects dim in [0, 2), got 2}}
  %0 = nn.iota dim = 2 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that iota rejects a boolean result.
func.func @iota_i1() -> tensor<4xi1> {
  // expected-error @+1 {{'nn.iota' op expects a float or i32/i64 result, got i1}}
  %0 = nn.iota dim = 0 : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// Tests that attention rejects kv heads that do not divide the query heads.
func.func @attention_0(%q: tensor<1x4x8x16xf32>, %k: tensor<1x3x8x16xf32>, %v: tensor<1x3x8x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{'nn.attention' op expects kv heads dividing the query heads, got 3 kv heads for 4 heads}}
  %0 = nn.attention %q, %k, %v scale = 1.0 : (tensor<1x4x8x16xf32>, tensor<1x3x8x16xf32>, tensor<1x3x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

// Tests that attention rejects q and k of different head dims.
func.func @attention_1(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x8xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{'nn.attention' op expects q and k of one head dim, got 16 and 8}}
  %0 = nn.attention %q, %k, %v scale = 1.0 : (tensor<1x4x8x16xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

// Tests that attention rejects k and v of different key counts.
func.func @attention_2(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x4x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{'nn.attention' op expects k and v with the same kv heads and keys, got 2x8 and 2x4}}
  %0 = nn.attention %q, %k, %v scale = 1.0 : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x4x16xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

// Tests that attention rejects a result of the wrong shape.
func.func @attention_3(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{'nn.attention' op expects a result of type 'tensor<1x4x8x4xf32>', got 'tensor<1x4x8x16xf32>'}}
  %0 = nn.attention %q, %k, %v scale = 1.0 : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x4xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

// Tests that attention rejects operands that are not [b, heads, seq, d].
func.func @attention_4(%q: tensor<4x8x16xf32>, %k: tensor<4x8x16xf32>, %v: tensor<4x8x16xf32>) -> tensor<4x8x16xf32> {
  // expected-error @+1 {{'nn.attention' op expects q, k and v of rank 4 ([batch, heads, seq, head dim]), got ranks 3, 3, 3}}
  %0 = nn.attention %q, %k, %v scale = 1.0 : (tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  return %0 : tensor<4x8x16xf32>
}

// -----

// Tests that zigzag order is a causal attention's.
func.func @zigzag_not_causal(%q: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{'nn.attention' op expects zigzag order (2) only causal, without dropout or a piece, on as many queries as keys in 2 zigzag chunks, got 8 queries and 8 keys}}
  %0 = nn.attention %q, %q, %q scale = 1.0 zigzag = 2 : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

// Tests that zigzag order needs whole chunks: 8 rows are not 6 chunks.
func.func @zigzag_chunks(%q: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{'nn.attention' op expects zigzag order (3) only causal, without dropout or a piece, on as many queries as keys in 2 zigzag chunks, got 8 queries and 8 keys}}
  %0 = nn.attention %q, %q, %q causal = true scale = 1.0 zigzag = 3 : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %0 : tensor<1x4x8x16xf32>
}

// -----

// Tests that a ring block in zigzag order holds whole chunks: a ring of 4
// does not split 2 chunks.
func.func @zigzag_block(%q: tensor<1x4x8x16xf32>, %i: tensor<1xi64>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{'nn.attention_block' op expects zigzag order (1) only causal, on as many queries as keys, in whole chunks of 2 zigzag over the ring of 4, got 8 queries and 8 keys}}
  %o, %l = nn.attention_block %q, %q, %q index %i causal = true scale = 1.0 ring_step = 1 ring_size = 4 zigzag = 1 : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1xi64>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8xf32>)
  return %o : tensor<1x4x8x16xf32>
}

// -----

// Tests that attention_grad rejects a k gradient of another shape than k.
func.func @attention_grad_shape(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %o: tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{'nn.attention_grad' op expects a k gradient of type 'tensor<1x2x8x16xf32>', got 'tensor<1x4x8x16xf32>'}}
  %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %o, %o scale = 1.0 : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>)
  return %dq : tensor<1x4x8x16xf32>
}

// -----

// Tests that clamp rejects an empty range.
func.func @clamp_range(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.clamp' op expects min <= max, got 2.000000e+00 > 1.000000e+00}}
  %0 = nn.clamp %x min = 2.0 max = 1.0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that gather rejects indices whose other dims differ from the input's.
func.func @gather_dims(%x: tensor<4x10xf32>, %i: tensor<3x3xi64>) -> tensor<3x3xf32> {
  // expected-error @+1 {{'nn.gather' op expects indices of size 4 in dim 0, got 3}}
  %0 = nn.gather %x, %i axis = 1 : (tensor<4x10xf32>, tensor<3x3xi64>) -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

// Tests that gather rejects an axis outside the input.
func.func @gather_axis(%x: tensor<4x10xf32>, %i: tensor<4x3xi64>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'nn.gather' op expects axis in [0, 2), got 2}}
  %0 = nn.gather %x, %i axis = 2 : (tensor<4x10xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// Tests that scatter_add rejects a source not in the shape of its indices.
func.func @scatter_shape(%s: tensor<4x2xf32>, %i: tensor<4x3xi64>) -> tensor<4x10xf32> {
  // expected-error @+1 {{'nn.scatter_add' op expects the source in the shape of the indices, got 'tensor<4x2xf32>'}}
  %0 = nn.scatter_add %s, %i axis = 1 : (tensor<4x2xf32>, tensor<4x3xi64>) -> tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}

// -----

// Tests that moe_dispatch needs a [tokens, k] choice per group.
func.func @moe_dispatch_rank(%i: tensor<16xi64>) -> tensor<16x4x10xf32> {
  // expected-error @+1 {{'nn.moe_dispatch' op expects indices of rank at least 2 ([..., tokens, k]), got rank 1}}
  %m = nn.moe_dispatch %i : tensor<16xi64> -> tensor<16x4x10xf32>
  return %m : tensor<16x4x10xf32>
}

// -----

// Tests that moe_dispatch keeps the groups and tokens and appends experts and capacity.
func.func @moe_dispatch_shape(%i: tensor<2x16x2xi64>) -> tensor<2x8x4x10xf32> {
  // expected-error @+1 {{'nn.moe_dispatch' op expects a result of shape [2, 16] ++ [experts, capacity], got [2, 8, 4, 10]}}
  %m = nn.moe_dispatch %i : tensor<2x16x2xi64> -> tensor<2x8x4x10xf32>
  return %m : tensor<2x8x4x10xf32>
}

// -----

// Tests that top_k rejects k larger than the row.
func.func @top_k_range(%x: tensor<4x10xf32>) -> tensor<4x11xi64> {
  // expected-error @+1 {{'nn.top_k' op expects k in [1, 10], got 11}}
  %v, %i = nn.top_k %x k = 11 : tensor<4x10xf32> -> (tensor<4x11xf32>, tensor<4x11xi64>)
  return %i : tensor<4x11xi64>
}

// -----

// Tests that dropout rejects a rate outside [0, 1).
func.func @dropout_rate(%x: tensor<4x8xf32>, %step: tensor<i64>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.dropout' op expects a rate in [0, 1), got 1}}
  %0 = nn.dropout %x step %step rate = 1.0 seed = 0 : tensor<4x8xf32>, tensor<i64>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a random op's piece comes with its global shape.
func.func @random_piece_alone(%step: tensor<i64>, %piece: tensor<2xi64>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.random_uniform' op expects piece and global_shape together (a device's piece) or neither (the whole tensor)}}
  %0 = nn.random_uniform step %step piece %piece seed = 0 : tensor<i64>, tensor<2xi64> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a piece index has one entry per dim.
func.func @random_piece_rank(%step: tensor<i64>, %piece: tensor<3xi64>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.random_uniform' op expects a piece index for each of the 2 dims, got 'tensor<3xi64>'}}
  %0 = nn.random_uniform step %step piece %piece seed = 0 {global_shape = array<i64: 8, 8>} : tensor<i64>, tensor<3xi64> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that the global shape holds whole pieces.
func.func @random_global_shape(%x: tensor<4x8xf32>, %step: tensor<i64>, %piece: tensor<2xi64>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.dropout' op expects global_shape to hold whole pieces, but dim 1 of size 12 is not a multiple of 8}}
  %0 = nn.dropout %x step %step piece %piece rate = 0.5 seed = 0 {global_shape = array<i64: 4, 12>} : tensor<4x8xf32>, tensor<i64>, tensor<2xi64>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that attention's dropout needs the step its mask is drawn for.
func.func @attention_dropout_step(%q: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  // expected-error @+1 {{'nn.attention' op expects the step counter (`step`) its dropout mask is drawn for}}
  %0 = nn.attention %q, %q, %q scale = 0.25 dropout = 0.1
      : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  return %0 : tensor<1x2x8x16xf32>
}

// -----

// Tests that attention's dropout rate is below 1.
func.func @attention_dropout_rate(%q: tensor<1x2x8x16xf32>, %step: tensor<i64>) -> tensor<1x2x8x16xf32> {
  // expected-error @+1 {{'nn.attention' op expects a rate in [0, 1), got 1}}
  %0 = nn.attention %q, %q, %q step %step scale = 0.25 dropout = 1.0
      : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<i64>) -> tensor<1x2x8x16xf32>
  return %0 : tensor<1x2x8x16xf32>
}

// -----

// Tests that a fused body holds elementwise ops only.
func.func @fused_dot(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = nn.fused(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>):
    // expected-error @+1 {{'nn.dot' op cannot be fused: expects an elementwise op of f32, bf16, f16 or i1 values, a splat float constant or a broadcast}}
    %d = nn.dot %a, %a contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    nn.yield %d : tensor<4x4xf32>
  }
  return %0 : tensor<4x4xf32>
}

// -----

// Tests that every value of a fused body has the fused shape.
func.func @fused_shape(%x: tensor<4xf32>) -> tensor<4x4xf32> {
  %0 = nn.fused(%x) : (tensor<4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // expected-error @+1 {{'nn.exp' op expects the fused shape [4, 4], got [4]}}
    %e = nn.exp %a : tensor<4xf32>
    %b = nn.broadcast %e dims = [1] : tensor<4xf32> -> tensor<4x4xf32>
    nn.yield %b : tensor<4x4xf32>
  }
  return %0 : tensor<4x4xf32>
}

// -----

// Tests that a fused broadcast reads an input of the fused op.
func.func @fused_broadcast(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = nn.fused(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>):
    %e = nn.exp %a : tensor<4x4xf32>
    // expected-error @+1 {{'nn.broadcast' op expects to broadcast an input of the fused op}}
    %b = nn.broadcast %e dims = [0, 1] : tensor<4x4xf32> -> tensor<4x4xf32>
    nn.yield %b : tensor<4x4xf32>
  }
  return %0 : tensor<4x4xf32>
}

// -----

// Tests that a fused op's results have one shape.
func.func @fused_results(%x: tensor<4x4xf32>, %y: tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{'nn.fused' op expects results of one shape, got [4] and [4, 4]}}
  %0:2 = nn.fused(%x, %y) : (tensor<4x4xf32>, tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4x4xf32>, %b: tensor<4xf32>):
    nn.yield %a, %b : tensor<4x4xf32>, tensor<4xf32>
  }
  return %0#0, %0#1 : tensor<4x4xf32>, tensor<4xf32>
}

// -----

// Tests that a fused body yields the fused op's result types.
func.func @fused_yield(%x: tensor<4x4xf32>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{'nn.fused' op expects the body to yield the results' types}}
  %0 = nn.fused(%x) : (tensor<4x4xf32>) -> tensor<4x4xbf16> {
  ^bb0(%a: tensor<4x4xf32>):
    nn.yield %a : tensor<4x4xf32>
  }
  return %0 : tensor<4x4xbf16>
}

// -----

// Tests that a fused body's arguments are the inputs.
func.func @fused_arguments(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'nn.fused' op expects the body's arguments to have the inputs' types}}
  %0 = nn.fused(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xbf16>):
    %c = nn.cast %a : tensor<4x4xbf16> to tensor<4x4xf32>
    nn.yield %c : tensor<4x4xf32>
  }
  return %0 : tensor<4x4xf32>
}

// -----

// Tests that adamw's schedule decays after its warmup.
func.func @adamw_schedule_steps(%p: tensor<16x64xf32>, %t: tensor<i64>) -> tensor<16x64xf32> {
  // expected-error @+1 {{'nn.adamw' op expects decay_steps (5) past warmup_steps (10) for a cosine schedule}}
  %p2, %m2, %v2 = nn.adamw %p, %p, %p, %p, %t lr = 1.0e-03 {schedule = 2 : i32, warmup_steps = 10, decay_steps = 5}
      : tensor<16x64xf32>, tensor<16x64xf32>, tensor<i64>
  return %p2 : tensor<16x64xf32>
}

// -----

func.func @adamw_min_lr(%p: tensor<16x64xf32>, %t: tensor<i64>) -> tensor<16x64xf32> {
  // expected-error @+1 {{'nn.adamw' op expects min_lr (1.000000e-02) at most lr (1.000000e-03)}}
  %p2, %m2, %v2 = nn.adamw %p, %p, %p, %p, %t lr = 1.0e-03 {min_lr = 1.0e-02 : f32}
      : tensor<16x64xf32>, tensor<16x64xf32>, tensor<i64>
  return %p2 : tensor<16x64xf32>
}

// -----

// Tests that an update reading a gradient norm clips to a norm.
func.func @adamw_norm_without_max(%p: tensor<16x64xf32>, %t: tensor<i64>, %n: tensor<f32>) -> tensor<16x64xf32> {
  // expected-error @+1 {{'nn.adamw' op reads a gradient norm but clips to no max_grad_norm and scales no loss}}
  %p2, %m2, %v2 = nn.adamw %p, %p, %p, %p, %t norm %n lr = 1.0e-03
      : tensor<16x64xf32>, tensor<16x64xf32>, tensor<i64> norm tensor<f32>
  return %p2 : tensor<16x64xf32>
}

// -----

// Tests that a piece index is one coordinate.
func.func @embedding_piece_shape(%t: tensor<512x64xf32>, %i: tensor<2x8xi32>, %p: tensor<2xi64>) -> tensor<2x8x64xf32> {
  // expected-error @+1 {{'nn.embedding' op expects a piece index of shape [1], got [2]}}
  %0 = nn.embedding %t, %i piece %p : tensor<512x64xf32>, tensor<2x8xi32>, tensor<2xi64>
  return %0 : tensor<2x8x64xf32>
}

// -----

func.func @embedding_grad_piece_shape(%g: tensor<2x8x64xf32>, %i: tensor<2x8xi32>, %p: tensor<2xi64>) -> tensor<512x64xf32> {
  // expected-error @+1 {{'nn.embedding_grad' op expects a piece index of shape [1], got [2]}}
  %0 = nn.embedding_grad %g, %i piece %p vocab = 512 : tensor<2x8x64xf32>, tensor<2x8xi32>, tensor<2xi64>
  return %0 : tensor<512x64xf32>
}

// -----

func.func @one_hot_piece_shape(%i: tensor<2x8xi32>, %p: tensor<2xi64>) -> tensor<2x8x16xf32> {
  // expected-error @+1 {{'nn.one_hot' op expects a piece index of shape [1], got [2]}}
  %0 = nn.one_hot %i piece %p : tensor<2x8xi32>, tensor<2xi64> -> tensor<2x8x16xf32>
  return %0 : tensor<2x8x16xf32>
}

// -----

func.func @iota_piece_shape(%p: tensor<2xi64>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'nn.iota' op expects a piece index of shape [1], got [2]}}
  %0 = nn.iota dim = 0 piece %p : tensor<2xi64> : tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}
