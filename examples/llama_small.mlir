module {
  dist.mesh @mesh ["dp"=1, "tp"=1]
  func.func @llama(%arg0: tensor<8x16xi32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}, %arg1: tensor<8x16xi32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}, %arg2: tensor<256x64xf32> {nn.param = "tok_embeddings"}, %arg3: tensor<64xf32> {nn.param = "layers.0.attention_norm"}, %arg4: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.0.attention.wq"}, %arg5: tensor<64x32xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.0.attention.wk"}, %arg6: tensor<64x32xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.0.attention.wv"}, %arg7: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>, nn.param = "layers.0.attention.wo"}, %arg8: tensor<64xf32> {nn.param = "layers.0.ffn_norm"}, %arg9: tensor<64x128xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.0.feed_forward.w1"}, %arg10: tensor<128x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>, nn.param = "layers.0.feed_forward.w2"}, %arg11: tensor<64x128xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.0.feed_forward.w3"}, %arg12: tensor<64xf32> {nn.param = "layers.1.attention_norm"}, %arg13: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.1.attention.wq"}, %arg14: tensor<64x32xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.1.attention.wk"}, %arg15: tensor<64x32xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.1.attention.wv"}, %arg16: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>, nn.param = "layers.1.attention.wo"}, %arg17: tensor<64xf32> {nn.param = "layers.1.ffn_norm"}, %arg18: tensor<64x128xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.1.feed_forward.w1"}, %arg19: tensor<128x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>, nn.param = "layers.1.feed_forward.w2"}, %arg20: tensor<64x128xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.1.feed_forward.w3"}, %arg21: tensor<64xf32> {nn.param = "norm"}, %arg22: tensor<64x256xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "output"}) -> tensor<f32> {
    %0 = nn.embedding %arg2, %arg0 : tensor<256x64xf32>, tensor<8x16xi32>
    %1 = nn.rms_norm %0, %arg3 epsilon = 9.99999974E-6 : tensor<8x16x64xf32>, tensor<64xf32>
    %2 = nn.iota dim = 0 : tensor<16x8xf32>
    %3 = nn.iota dim = 1 : tensor<16x8xf32>
    %4 = nn.constant dense<-1.15129256> : tensor<16x8xf32>
    %5 = nn.mul %3, %4 : tensor<16x8xf32>
    %6 = nn.exp %5 : tensor<16x8xf32>
    %7 = nn.mul %2, %6 : tensor<16x8xf32>
    %8 = nn.concat %7, %7 dim = 1 : tensor<16x8xf32>, tensor<16x8xf32> -> tensor<16x16xf32>
    %9 = nn.sin %8 : tensor<16x16xf32>
    %10 = nn.cos %8 : tensor<16x16xf32>
    %11 = nn.dot %1, %arg4 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x64xf32>) -> tensor<8x16x64xf32>
    %12 = nn.reshape %11 : tensor<8x16x64xf32> -> tensor<8x16x4x16xf32>
    %13 = nn.transpose %12 permutation = [0, 2, 1, 3] : tensor<8x16x4x16xf32> -> tensor<8x4x16x16xf32>
    %14 = nn.slice %13 start = [0, 0, 0, 0] limit = [8, 4, 16, 8] : tensor<8x4x16x16xf32> -> tensor<8x4x16x8xf32>
    %15 = nn.slice %13 start = [0, 0, 0, 8] limit = [8, 4, 16, 16] : tensor<8x4x16x16xf32> -> tensor<8x4x16x8xf32>
    %16 = nn.neg %15 : tensor<8x4x16x8xf32>
    %17 = nn.concat %16, %14 dim = 3 : tensor<8x4x16x8xf32>, tensor<8x4x16x8xf32> -> tensor<8x4x16x16xf32>
    %18 = nn.broadcast %10 dims = [2, 3] : tensor<16x16xf32> -> tensor<8x4x16x16xf32>
    %19 = nn.mul %13, %18 : tensor<8x4x16x16xf32>
    %20 = nn.broadcast %9 dims = [2, 3] : tensor<16x16xf32> -> tensor<8x4x16x16xf32>
    %21 = nn.mul %17, %20 : tensor<8x4x16x16xf32>
    %22 = nn.add %19, %21 : tensor<8x4x16x16xf32>
    %23 = nn.dot %1, %arg5 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x32xf32>) -> tensor<8x16x32xf32>
    %24 = nn.reshape %23 : tensor<8x16x32xf32> -> tensor<8x16x2x16xf32>
    %25 = nn.transpose %24 permutation = [0, 2, 1, 3] : tensor<8x16x2x16xf32> -> tensor<8x2x16x16xf32>
    %26 = nn.slice %25 start = [0, 0, 0, 0] limit = [8, 2, 16, 8] : tensor<8x2x16x16xf32> -> tensor<8x2x16x8xf32>
    %27 = nn.slice %25 start = [0, 0, 0, 8] limit = [8, 2, 16, 16] : tensor<8x2x16x16xf32> -> tensor<8x2x16x8xf32>
    %28 = nn.neg %27 : tensor<8x2x16x8xf32>
    %29 = nn.concat %28, %26 dim = 3 : tensor<8x2x16x8xf32>, tensor<8x2x16x8xf32> -> tensor<8x2x16x16xf32>
    %30 = nn.broadcast %10 dims = [2, 3] : tensor<16x16xf32> -> tensor<8x2x16x16xf32>
    %31 = nn.mul %25, %30 : tensor<8x2x16x16xf32>
    %32 = nn.broadcast %9 dims = [2, 3] : tensor<16x16xf32> -> tensor<8x2x16x16xf32>
    %33 = nn.mul %29, %32 : tensor<8x2x16x16xf32>
    %34 = nn.add %31, %33 : tensor<8x2x16x16xf32>
    %35 = nn.dot %1, %arg6 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x32xf32>) -> tensor<8x16x32xf32>
    %36 = nn.reshape %35 : tensor<8x16x32xf32> -> tensor<8x16x2x16xf32>
    %37 = nn.transpose %36 permutation = [0, 2, 1, 3] : tensor<8x16x2x16xf32> -> tensor<8x2x16x16xf32>
    %38 = nn.broadcast %34 dims = [0, 1, 3, 4] : tensor<8x2x16x16xf32> -> tensor<8x2x2x16x16xf32>
    %39 = nn.reshape %38 : tensor<8x2x2x16x16xf32> -> tensor<8x4x16x16xf32>
    %40 = nn.dot %22, %39 batching_dims = [0, 1] x [0, 1] contracting_dims = [3] x [3] : (tensor<8x4x16x16xf32>, tensor<8x4x16x16xf32>) -> tensor<8x4x16x16xf32>
    %41 = nn.constant dense<2.500000e-01> : tensor<8x4x16x16xf32>
    %42 = nn.mul %40, %41 : tensor<8x4x16x16xf32>
    %43 = nn.causal_mask %42 : tensor<8x4x16x16xf32>
    %44 = nn.softmax %43 dim = 3 : tensor<8x4x16x16xf32>
    %45 = nn.broadcast %37 dims = [0, 1, 3, 4] : tensor<8x2x16x16xf32> -> tensor<8x2x2x16x16xf32>
    %46 = nn.reshape %45 : tensor<8x2x2x16x16xf32> -> tensor<8x4x16x16xf32>
    %47 = nn.dot %44, %46 batching_dims = [0, 1] x [0, 1] contracting_dims = [3] x [2] : (tensor<8x4x16x16xf32>, tensor<8x4x16x16xf32>) -> tensor<8x4x16x16xf32>
    %48 = nn.transpose %47 permutation = [0, 2, 1, 3] : tensor<8x4x16x16xf32> -> tensor<8x16x4x16xf32>
    %49 = nn.reshape %48 : tensor<8x16x4x16xf32> -> tensor<8x16x64xf32>
    %50 = nn.dot %49, %arg7 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x64xf32>) -> tensor<8x16x64xf32>
    %51 = nn.add %0, %50 : tensor<8x16x64xf32>
    %52 = nn.rms_norm %51, %arg8 epsilon = 9.99999974E-6 : tensor<8x16x64xf32>, tensor<64xf32>
    %53 = nn.dot %52, %arg9 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x128xf32>) -> tensor<8x16x128xf32>
    %54 = nn.silu %53 : tensor<8x16x128xf32>
    %55 = nn.dot %52, %arg11 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x128xf32>) -> tensor<8x16x128xf32>
    %56 = nn.mul %54, %55 : tensor<8x16x128xf32>
    %57 = nn.dot %56, %arg10 contracting_dims = [2] x [0] : (tensor<8x16x128xf32>, tensor<128x64xf32>) -> tensor<8x16x64xf32>
    %58 = nn.add %51, %57 : tensor<8x16x64xf32>
    %59 = nn.rms_norm %58, %arg12 epsilon = 9.99999974E-6 : tensor<8x16x64xf32>, tensor<64xf32>
    %60 = nn.iota dim = 0 : tensor<16x8xf32>
    %61 = nn.iota dim = 1 : tensor<16x8xf32>
    %62 = nn.constant dense<-1.15129256> : tensor<16x8xf32>
    %63 = nn.mul %61, %62 : tensor<16x8xf32>
    %64 = nn.exp %63 : tensor<16x8xf32>
    %65 = nn.mul %60, %64 : tensor<16x8xf32>
    %66 = nn.concat %65, %65 dim = 1 : tensor<16x8xf32>, tensor<16x8xf32> -> tensor<16x16xf32>
    %67 = nn.sin %66 : tensor<16x16xf32>
    %68 = nn.cos %66 : tensor<16x16xf32>
    %69 = nn.dot %59, %arg13 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x64xf32>) -> tensor<8x16x64xf32>
    %70 = nn.reshape %69 : tensor<8x16x64xf32> -> tensor<8x16x4x16xf32>
    %71 = nn.transpose %70 permutation = [0, 2, 1, 3] : tensor<8x16x4x16xf32> -> tensor<8x4x16x16xf32>
    %72 = nn.slice %71 start = [0, 0, 0, 0] limit = [8, 4, 16, 8] : tensor<8x4x16x16xf32> -> tensor<8x4x16x8xf32>
    %73 = nn.slice %71 start = [0, 0, 0, 8] limit = [8, 4, 16, 16] : tensor<8x4x16x16xf32> -> tensor<8x4x16x8xf32>
    %74 = nn.neg %73 : tensor<8x4x16x8xf32>
    %75 = nn.concat %74, %72 dim = 3 : tensor<8x4x16x8xf32>, tensor<8x4x16x8xf32> -> tensor<8x4x16x16xf32>
    %76 = nn.broadcast %68 dims = [2, 3] : tensor<16x16xf32> -> tensor<8x4x16x16xf32>
    %77 = nn.mul %71, %76 : tensor<8x4x16x16xf32>
    %78 = nn.broadcast %67 dims = [2, 3] : tensor<16x16xf32> -> tensor<8x4x16x16xf32>
    %79 = nn.mul %75, %78 : tensor<8x4x16x16xf32>
    %80 = nn.add %77, %79 : tensor<8x4x16x16xf32>
    %81 = nn.dot %59, %arg14 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x32xf32>) -> tensor<8x16x32xf32>
    %82 = nn.reshape %81 : tensor<8x16x32xf32> -> tensor<8x16x2x16xf32>
    %83 = nn.transpose %82 permutation = [0, 2, 1, 3] : tensor<8x16x2x16xf32> -> tensor<8x2x16x16xf32>
    %84 = nn.slice %83 start = [0, 0, 0, 0] limit = [8, 2, 16, 8] : tensor<8x2x16x16xf32> -> tensor<8x2x16x8xf32>
    %85 = nn.slice %83 start = [0, 0, 0, 8] limit = [8, 2, 16, 16] : tensor<8x2x16x16xf32> -> tensor<8x2x16x8xf32>
    %86 = nn.neg %85 : tensor<8x2x16x8xf32>
    %87 = nn.concat %86, %84 dim = 3 : tensor<8x2x16x8xf32>, tensor<8x2x16x8xf32> -> tensor<8x2x16x16xf32>
    %88 = nn.broadcast %68 dims = [2, 3] : tensor<16x16xf32> -> tensor<8x2x16x16xf32>
    %89 = nn.mul %83, %88 : tensor<8x2x16x16xf32>
    %90 = nn.broadcast %67 dims = [2, 3] : tensor<16x16xf32> -> tensor<8x2x16x16xf32>
    %91 = nn.mul %87, %90 : tensor<8x2x16x16xf32>
    %92 = nn.add %89, %91 : tensor<8x2x16x16xf32>
    %93 = nn.dot %59, %arg15 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x32xf32>) -> tensor<8x16x32xf32>
    %94 = nn.reshape %93 : tensor<8x16x32xf32> -> tensor<8x16x2x16xf32>
    %95 = nn.transpose %94 permutation = [0, 2, 1, 3] : tensor<8x16x2x16xf32> -> tensor<8x2x16x16xf32>
    %96 = nn.broadcast %92 dims = [0, 1, 3, 4] : tensor<8x2x16x16xf32> -> tensor<8x2x2x16x16xf32>
    %97 = nn.reshape %96 : tensor<8x2x2x16x16xf32> -> tensor<8x4x16x16xf32>
    %98 = nn.dot %80, %97 batching_dims = [0, 1] x [0, 1] contracting_dims = [3] x [3] : (tensor<8x4x16x16xf32>, tensor<8x4x16x16xf32>) -> tensor<8x4x16x16xf32>
    %99 = nn.constant dense<2.500000e-01> : tensor<8x4x16x16xf32>
    %100 = nn.mul %98, %99 : tensor<8x4x16x16xf32>
    %101 = nn.causal_mask %100 : tensor<8x4x16x16xf32>
    %102 = nn.softmax %101 dim = 3 : tensor<8x4x16x16xf32>
    %103 = nn.broadcast %95 dims = [0, 1, 3, 4] : tensor<8x2x16x16xf32> -> tensor<8x2x2x16x16xf32>
    %104 = nn.reshape %103 : tensor<8x2x2x16x16xf32> -> tensor<8x4x16x16xf32>
    %105 = nn.dot %102, %104 batching_dims = [0, 1] x [0, 1] contracting_dims = [3] x [2] : (tensor<8x4x16x16xf32>, tensor<8x4x16x16xf32>) -> tensor<8x4x16x16xf32>
    %106 = nn.transpose %105 permutation = [0, 2, 1, 3] : tensor<8x4x16x16xf32> -> tensor<8x16x4x16xf32>
    %107 = nn.reshape %106 : tensor<8x16x4x16xf32> -> tensor<8x16x64xf32>
    %108 = nn.dot %107, %arg16 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x64xf32>) -> tensor<8x16x64xf32>
    %109 = nn.add %58, %108 : tensor<8x16x64xf32>
    %110 = nn.rms_norm %109, %arg17 epsilon = 9.99999974E-6 : tensor<8x16x64xf32>, tensor<64xf32>
    %111 = nn.dot %110, %arg18 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x128xf32>) -> tensor<8x16x128xf32>
    %112 = nn.silu %111 : tensor<8x16x128xf32>
    %113 = nn.dot %110, %arg20 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x128xf32>) -> tensor<8x16x128xf32>
    %114 = nn.mul %112, %113 : tensor<8x16x128xf32>
    %115 = nn.dot %114, %arg19 contracting_dims = [2] x [0] : (tensor<8x16x128xf32>, tensor<128x64xf32>) -> tensor<8x16x64xf32>
    %116 = nn.add %109, %115 : tensor<8x16x64xf32>
    %117 = nn.rms_norm %116, %arg21 epsilon = 9.99999974E-6 : tensor<8x16x64xf32>, tensor<64xf32>
    %118 = nn.dot %117, %arg22 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x256xf32>) -> tensor<8x16x256xf32>
    %119 = nn.cross_entropy %118, %arg1 : tensor<8x16x256xf32>, tensor<8x16xi32>
    %120 = nn.reduce_mean %119 dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
    return %120 : tensor<f32>
  }
}

