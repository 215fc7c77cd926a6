// RUN: tessera-opt %s -split-input-file --tessera-propagate=explain=true -verify-diagnostics -o /dev/null

// Tests that explain mode says where each value's sharding came from.
dist.mesh @mesh_dp_2_tp_4 ["dp"=2, "tp"=4]
// expected-remark @+3 {{argument #0: #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {}]> from the annotation of argument #0 of @origins}}
// expected-remark @+2 {{argument #1: #dist.sharding<@mesh_dp_2_tp_4, [{}, {"tp"}]> from the annotation of argument #1 of @origins}}
// expected-remark @+1 {{argument #2: #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {"tp"}]> dim 0 from the annotation of argument #0 of @origins, dim 1 from the annotation of argument #1 of @origins}}
func.func @origins(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {}]>},
                   %w: tensor<16x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{}, {"tp"}]>},
                   %b: tensor<8x64xf32>) -> tensor<8x64xf32> {
  // expected-remark @+1 {{result #0: #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {"tp"}]> dim 0 from the annotation of argument #0 of @origins, dim 1 from the annotation of argument #1 of @origins}}
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  // expected-remark @+1 {{result #0: #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {"tp"}]> dim 0 from the annotation of argument #0 of @origins, dim 1 from the annotation of argument #1 of @origins}}
  %s = nn.add %y, %b : tensor<8x64xf32>
  return %s : tensor<8x64xf32>
}

// -----

// Tests that a conflict is resolved towards the fewest bytes to reshard in
// the aggressive mode, and that explain mode names the competitors.
dist.mesh @mesh_x_2_y_2 ["x"=2, "y"=2]
// expected-remark @+2 {{argument #0}}
// expected-remark @+1 {{argument #1}}
func.func @conflict(%small: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{}, {"x"}]>},
                    %large: tensor<16x1024xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"y"}, {}]>}) -> tensor<8x1024xf32> {
  // expected-remark @+2 {{result #0: #dist.sharding<@mesh_x_2_y_2, [{}, {}]> from no annotation (replicated)}}
  // expected-remark @+1 {{conflict on factor k: operand #0 wants {"x"}, operand #1 wants {"y"}; kept {"y"} of operand #1 (fewest bytes to reshard)}}
  %y = nn.dot %small, %large contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x1024xf32>) -> tensor<8x1024xf32>
  return %y : tensor<8x1024xf32>
}

// -----

// Tests that an op without a sharding rule is warned about and replicated.
dist.mesh @mesh_x_2 ["x"=2]
// expected-remark @+1 {{argument #0: #dist.sharding<@mesh_x_2, [{"x"}]>}}
func.func @no_rule(%a: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh_x_2, [{"x"}]>}) -> tensor<8xf32> {
  // expected-warning @+2 {{op has no sharding rule; its results are replicated}}
  // expected-remark @+1 {{result #0: #dist.sharding<@mesh_x_2, [{}]> from no annotation (replicated)}}
  %c = arith.constant dense<1.0> : tensor<8xf32>
  // expected-remark @+1 {{result #0: #dist.sharding<@mesh_x_2, [{"x"}]> from the annotation of argument #0 of @no_rule}}
  %s = nn.add %a, %c : tensor<8xf32>
  return %s : tensor<8xf32>
}

// -----

// Tests that when two factors of an op want one axis, the factor whose
// tensors hold more bytes split over it keeps it: the small activation is
// gathered, not the large weight.
dist.mesh @mesh_tp_4 ["tp"=4]
// expected-remark @+2 {{argument #0}}
// expected-remark @+1 {{argument #1}}
func.func @shared_axis(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>},
                       %w: tensor<16x64xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {"tp"}]>}) -> tensor<8x64xf32> {
  // expected-remark @+2 {{result #0: #dist.sharding<@mesh_tp_4, [{}, {"tp"}]> dim 1 from the annotation of argument #1 of @shared_axis}}
  // expected-remark @+1 {{conflict on axis "tp": factor j keeps it, factor i gives it up (fewer bytes to reshard)}}
  %h = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  return %h : tensor<8x64xf32>
}
