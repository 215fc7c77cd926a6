module {
  dist.mesh @mesh ["dp"=1, "tp"=1]
  func.func @gpt(%arg0: tensor<8x16xi32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}, %arg1: tensor<8x16xi32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}, %arg2: tensor<256x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>, nn.param = "wte"}, %arg3: tensor<16x64xf32> {nn.param = "wpe"}, %arg4: tensor<64xf32> {nn.param = "blocks.0.ln1.gamma"}, %arg5: tensor<64xf32> {nn.param = "blocks.0.ln1.beta"}, %arg6: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "blocks.0.attn.wq"}, %arg7: tensor<64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}]>, nn.param = "blocks.0.attn.bq"}, %arg8: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "blocks.0.attn.wk"}, %arg9: tensor<64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}]>, nn.param = "blocks.0.attn.bk"}, %arg10: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "blocks.0.attn.wv"}, %arg11: tensor<64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}]>, nn.param = "blocks.0.attn.bv"}, %arg12: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>, nn.param = "blocks.0.attn.wo"}, %arg13: tensor<64xf32> {nn.param = "blocks.0.attn.bo"}, %arg14: tensor<64xf32> {nn.param = "blocks.0.ln2.gamma"}, %arg15: tensor<64xf32> {nn.param = "blocks.0.ln2.beta"}, %arg16: tensor<64x256xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "blocks.0.mlp.w1"}, %arg17: tensor<256xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}]>, nn.param = "blocks.0.mlp.b1"}, %arg18: tensor<256x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>, nn.param = "blocks.0.mlp.w2"}, %arg19: tensor<64xf32> {nn.param = "blocks.0.mlp.b2"}, %arg20: tensor<64xf32> {nn.param = "ln_f.gamma"}, %arg21: tensor<64xf32> {nn.param = "ln_f.beta"}) -> tensor<f32> {
    %0 = nn.embedding %arg2, %arg0 : tensor<256x64xf32>, tensor<8x16xi32>
    %1 = nn.broadcast %arg3 dims = [1, 2] : tensor<16x64xf32> -> tensor<8x16x64xf32>
    %2 = nn.add %0, %1 : tensor<8x16x64xf32>
    %3 = nn.layer_norm %2, %arg4, %arg5 : tensor<8x16x64xf32>, tensor<64xf32>, tensor<64xf32>
    %4 = nn.dot %3, %arg6 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x64xf32>) -> tensor<8x16x64xf32>
    %5 = nn.broadcast %arg7 dims = [2] : tensor<64xf32> -> tensor<8x16x64xf32>
    %6 = nn.add %4, %5 : tensor<8x16x64xf32>
    %7 = nn.reshape %6 : tensor<8x16x64xf32> -> tensor<8x16x4x16xf32>
    %8 = nn.transpose %7 permutation = [0, 2, 1, 3] : tensor<8x16x4x16xf32> -> tensor<8x4x16x16xf32>
    %9 = nn.dot %3, %arg8 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x64xf32>) -> tensor<8x16x64xf32>
    %10 = nn.broadcast %arg9 dims = [2] : tensor<64xf32> -> tensor<8x16x64xf32>
    %11 = nn.add %9, %10 : tensor<8x16x64xf32>
    %12 = nn.reshape %11 : tensor<8x16x64xf32> -> tensor<8x16x4x16xf32>
    %13 = nn.transpose %12 permutation = [0, 2, 1, 3] : tensor<8x16x4x16xf32> -> tensor<8x4x16x16xf32>
    %14 = nn.dot %3, %arg10 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x64xf32>) -> tensor<8x16x64xf32>
    %15 = nn.broadcast %arg11 dims = [2] : tensor<64xf32> -> tensor<8x16x64xf32>
    %16 = nn.add %14, %15 : tensor<8x16x64xf32>
    %17 = nn.reshape %16 : tensor<8x16x64xf32> -> tensor<8x16x4x16xf32>
    %18 = nn.transpose %17 permutation = [0, 2, 1, 3] : tensor<8x16x4x16xf32> -> tensor<8x4x16x16xf32>
    %19 = nn.attention %8, %13, %18 causal = true scale = 2.500000e-01 : (tensor<8x4x16x16xf32>, tensor<8x4x16x16xf32>, tensor<8x4x16x16xf32>) -> tensor<8x4x16x16xf32>
    %20 = nn.transpose %19 permutation = [0, 2, 1, 3] : tensor<8x4x16x16xf32> -> tensor<8x16x4x16xf32>
    %21 = nn.reshape %20 : tensor<8x16x4x16xf32> -> tensor<8x16x64xf32>
    %22 = nn.dot %21, %arg12 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x64xf32>) -> tensor<8x16x64xf32>
    %23 = nn.broadcast %arg13 dims = [2] : tensor<64xf32> -> tensor<8x16x64xf32>
    %24 = nn.add %22, %23 : tensor<8x16x64xf32>
    %25 = nn.add %2, %24 : tensor<8x16x64xf32>
    %26 = nn.layer_norm %25, %arg14, %arg15 : tensor<8x16x64xf32>, tensor<64xf32>, tensor<64xf32>
    %27 = nn.dot %26, %arg16 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x256xf32>) -> tensor<8x16x256xf32>
    %28 = nn.broadcast %arg17 dims = [2] : tensor<256xf32> -> tensor<8x16x256xf32>
    %29 = nn.add %27, %28 : tensor<8x16x256xf32>
    %30 = nn.gelu %29 : tensor<8x16x256xf32>
    %31 = nn.dot %30, %arg18 contracting_dims = [2] x [0] : (tensor<8x16x256xf32>, tensor<256x64xf32>) -> tensor<8x16x64xf32>
    %32 = nn.broadcast %arg19 dims = [2] : tensor<64xf32> -> tensor<8x16x64xf32>
    %33 = nn.add %31, %32 : tensor<8x16x64xf32>
    %34 = nn.add %25, %33 : tensor<8x16x64xf32>
    %35 = nn.layer_norm %34, %arg20, %arg21 : tensor<8x16x64xf32>, tensor<64xf32>, tensor<64xf32>
    %36 = nn.dot %35, %arg2 contracting_dims = [2] x [1] : (tensor<8x16x64xf32>, tensor<256x64xf32>) -> tensor<8x16x256xf32>
    %37 = nn.cross_entropy %36, %arg1 : tensor<8x16x256xf32>, tensor<8x16xi32>
    %38 = nn.reduce_mean %37 dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
    return %38 : tensor<f32>
  }
}

