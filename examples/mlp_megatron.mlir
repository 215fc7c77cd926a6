// A Megatron-LM style MLP block on a 2-D mesh: the batch is split over "dp";
// the first weight is split by columns and the second by rows over "tp"
// (column-parallel then row-parallel). Only the inputs, weights and the
// result are annotated; propagation completes the rest.
//
// Checked by test/examples/examples.test.

dist.mesh @mesh_dp_2_tp_2 ["dp"=2, "tp"=2]

func.func @mlp(
    %x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{"dp"}, {}]>},
    %target: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{"dp"}, {}]>},
    %w1: tensor<16x64xf32> {nn.param = "fc1.w", dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{}, {"tp"}]>},
    %b1: tensor<64xf32> {nn.param = "fc1.b", dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{"tp"}]>},
    %w2: tensor<64x16xf32> {nn.param = "fc2.w", dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{"tp"}, {}]>},
    %b2: tensor<16xf32> {nn.param = "fc2.b", dist.sharding = #dist.sharding<@mesh_dp_2_tp_2, [{}]>})
    -> tensor<f32> {
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0]
      : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %b1b = nn.broadcast %b1 dims = [1] : tensor<64xf32> -> tensor<8x64xf32>
  %h1 = nn.add %h, %b1b : tensor<8x64xf32>
  %a = nn.gelu %h1 : tensor<8x64xf32>
  // The contracting dim is split over "tp": the partitioner all-reduces here.
  %y = nn.dot %a, %w2 contracting_dims = [1] x [0]
      : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  %b2b = nn.broadcast %b2 dims = [1] : tensor<16xf32> -> tensor<8x16xf32>
  %y1 = nn.add %y, %b2b : tensor<8x16xf32>
  %d = nn.sub %y1, %target : tensor<8x16xf32>
  %sq = nn.mul %d, %d : tensor<8x16xf32>
  %loss = nn.reduce_mean %sq dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
