module {
  dist.mesh @mesh ["dp"=1, "tp"=1]
  func.func @mlp(%arg0: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}, %arg1: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}, %arg2: tensor<16x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.0.w"}, %arg3: tensor<64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}]>, nn.param = "layers.0.b"}, %arg4: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>, nn.param = "layers.1.w"}, %arg5: tensor<64xf32> {nn.param = "layers.1.b"}, %arg6: tensor<64x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.2.w"}, %arg7: tensor<16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}]>, nn.param = "layers.2.b"}) -> tensor<f32> {
    %0 = nn.dot %arg0, %arg2 contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
    %1 = nn.broadcast %arg3 dims = [1] : tensor<64xf32> -> tensor<8x64xf32>
    %2 = nn.add %0, %1 : tensor<8x64xf32>
    %3 = nn.relu %2 : tensor<8x64xf32>
    %4 = nn.dot %3, %arg4 contracting_dims = [1] x [0] : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %5 = nn.broadcast %arg5 dims = [1] : tensor<64xf32> -> tensor<8x64xf32>
    %6 = nn.add %4, %5 : tensor<8x64xf32>
    %7 = nn.relu %6 : tensor<8x64xf32>
    %8 = nn.dot %7, %arg6 contracting_dims = [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
    %9 = nn.broadcast %arg7 dims = [1] : tensor<16xf32> -> tensor<8x16xf32>
    %10 = nn.add %8, %9 : tensor<8x16xf32>
    %11 = nn.sub %10, %arg1 : tensor<8x16xf32>
    %12 = nn.mul %11, %11 : tensor<8x16xf32>
    %13 = nn.reduce_mean %12 dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
    return %13 : tensor<f32>
  }
}

