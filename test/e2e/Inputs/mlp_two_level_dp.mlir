// An MLP trained with data parallelism over two mesh axes, "node" (major)
// and "gpu" (minor, the fast intra-node group), as hybrid sharded data
// parallelism lays out a cluster. Used by zero.test.
dist.mesh @mesh ["node"=2, "gpu"=2]

func.func @mlp(
    %x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"node", "gpu"}, {}]>},
    %target: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"node", "gpu"}, {}]>},
    %w1: tensor<16x32xf32> {nn.param = "fc1.w"},
    %b1: tensor<32xf32> {nn.param = "fc1.b"},
    %w2: tensor<32x8xf32> {nn.param = "fc2.w"})
    -> tensor<f32> {
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0]
      : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %b1b = nn.broadcast %b1 dims = [1] : tensor<32xf32> -> tensor<8x32xf32>
  %h1 = nn.add %h, %b1b : tensor<8x32xf32>
  %a = nn.gelu %h1 : tensor<8x32xf32>
  %y = nn.dot %a, %w2 contracting_dims = [1] x [0]
      : (tensor<8x32xf32>, tensor<32x8xf32>) -> tensor<8x8xf32>
  %d = nn.sub %y, %target : tensor<8x8xf32>
  %sq = nn.mul %d, %d : tensor<8x8xf32>
  %loss = nn.reduce_mean %sq dims = [0, 1] : tensor<8x8xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
