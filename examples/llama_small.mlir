module {
  dist.mesh @mesh ["dp"=1, "tp"=1]
  func.func @llama(%arg0: tensor<8x16xi32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}, %arg1: tensor<8x16xi32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}, %arg2: tensor<256x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>, nn.param = "tok_embeddings"}, %arg3: tensor<64xf32> {nn.param = "layers.0.attention_norm"}, %arg4: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.0.attention.wq"}, %arg5: tensor<64x32xf32> {nn.param = "layers.0.attention.wk"}, %arg6: tensor<64x32xf32> {nn.param = "layers.0.attention.wv"}, %arg7: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>, nn.param = "layers.0.attention.wo"}, %arg8: tensor<64xf32> {nn.param = "layers.0.ffn_norm"}, %arg9: tensor<64x128xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.0.feed_forward.w1"}, %arg10: tensor<128x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>, nn.param = "layers.0.feed_forward.w2"}, %arg11: tensor<64x128xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.0.feed_forward.w3"}, %arg12: tensor<64xf32> {nn.param = "layers.1.attention_norm"}, %arg13: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.1.attention.wq"}, %arg14: tensor<64x32xf32> {nn.param = "layers.1.attention.wk"}, %arg15: tensor<64x32xf32> {nn.param = "layers.1.attention.wv"}, %arg16: tensor<64x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>, nn.param = "layers.1.attention.wo"}, %arg17: tensor<64xf32> {nn.param = "layers.1.ffn_norm"}, %arg18: tensor<64x128xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.1.feed_forward.w1"}, %arg19: tensor<128x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>, nn.param = "layers.1.feed_forward.w2"}, %arg20: tensor<64x128xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "layers.1.feed_forward.w3"}, %arg21: tensor<64xf32> {nn.param = "norm"}, %arg22: tensor<64x256xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>, nn.param = "output"}) -> tensor<f32> {
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
    %38 = nn.attention %22, %34, %37 causal = true scale = 2.500000e-01 : (tensor<8x4x16x16xf32>, tensor<8x2x16x16xf32>, tensor<8x2x16x16xf32>) -> tensor<8x4x16x16xf32>
    %39 = nn.transpose %38 permutation = [0, 2, 1, 3] : tensor<8x4x16x16xf32> -> tensor<8x16x4x16xf32>
    %40 = nn.reshape %39 : tensor<8x16x4x16xf32> -> tensor<8x16x64xf32>
    %41 = nn.dot %40, %arg7 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x64xf32>) -> tensor<8x16x64xf32>
    %42 = nn.add %0, %41 : tensor<8x16x64xf32>
    %43 = nn.rms_norm %42, %arg8 epsilon = 9.99999974E-6 : tensor<8x16x64xf32>, tensor<64xf32>
    %44 = nn.dot %43, %arg9 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x128xf32>) -> tensor<8x16x128xf32>
    %45 = nn.silu %44 : tensor<8x16x128xf32>
    %46 = nn.dot %43, %arg11 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x128xf32>) -> tensor<8x16x128xf32>
    %47 = nn.mul %45, %46 : tensor<8x16x128xf32>
    %48 = nn.dot %47, %arg10 contracting_dims = [2] x [0] : (tensor<8x16x128xf32>, tensor<128x64xf32>) -> tensor<8x16x64xf32>
    %49 = nn.add %42, %48 : tensor<8x16x64xf32>
    %50 = nn.rms_norm %49, %arg12 epsilon = 9.99999974E-6 : tensor<8x16x64xf32>, tensor<64xf32>
    %51 = nn.iota dim = 0 : tensor<16x8xf32>
    %52 = nn.iota dim = 1 : tensor<16x8xf32>
    %53 = nn.constant dense<-1.15129256> : tensor<16x8xf32>
    %54 = nn.mul %52, %53 : tensor<16x8xf32>
    %55 = nn.exp %54 : tensor<16x8xf32>
    %56 = nn.mul %51, %55 : tensor<16x8xf32>
    %57 = nn.concat %56, %56 dim = 1 : tensor<16x8xf32>, tensor<16x8xf32> -> tensor<16x16xf32>
    %58 = nn.sin %57 : tensor<16x16xf32>
    %59 = nn.cos %57 : tensor<16x16xf32>
    %60 = nn.dot %50, %arg13 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x64xf32>) -> tensor<8x16x64xf32>
    %61 = nn.reshape %60 : tensor<8x16x64xf32> -> tensor<8x16x4x16xf32>
    %62 = nn.transpose %61 permutation = [0, 2, 1, 3] : tensor<8x16x4x16xf32> -> tensor<8x4x16x16xf32>
    %63 = nn.slice %62 start = [0, 0, 0, 0] limit = [8, 4, 16, 8] : tensor<8x4x16x16xf32> -> tensor<8x4x16x8xf32>
    %64 = nn.slice %62 start = [0, 0, 0, 8] limit = [8, 4, 16, 16] : tensor<8x4x16x16xf32> -> tensor<8x4x16x8xf32>
    %65 = nn.neg %64 : tensor<8x4x16x8xf32>
    %66 = nn.concat %65, %63 dim = 3 : tensor<8x4x16x8xf32>, tensor<8x4x16x8xf32> -> tensor<8x4x16x16xf32>
    %67 = nn.broadcast %59 dims = [2, 3] : tensor<16x16xf32> -> tensor<8x4x16x16xf32>
    %68 = nn.mul %62, %67 : tensor<8x4x16x16xf32>
    %69 = nn.broadcast %58 dims = [2, 3] : tensor<16x16xf32> -> tensor<8x4x16x16xf32>
    %70 = nn.mul %66, %69 : tensor<8x4x16x16xf32>
    %71 = nn.add %68, %70 : tensor<8x4x16x16xf32>
    %72 = nn.dot %50, %arg14 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x32xf32>) -> tensor<8x16x32xf32>
    %73 = nn.reshape %72 : tensor<8x16x32xf32> -> tensor<8x16x2x16xf32>
    %74 = nn.transpose %73 permutation = [0, 2, 1, 3] : tensor<8x16x2x16xf32> -> tensor<8x2x16x16xf32>
    %75 = nn.slice %74 start = [0, 0, 0, 0] limit = [8, 2, 16, 8] : tensor<8x2x16x16xf32> -> tensor<8x2x16x8xf32>
    %76 = nn.slice %74 start = [0, 0, 0, 8] limit = [8, 2, 16, 16] : tensor<8x2x16x16xf32> -> tensor<8x2x16x8xf32>
    %77 = nn.neg %76 : tensor<8x2x16x8xf32>
    %78 = nn.concat %77, %75 dim = 3 : tensor<8x2x16x8xf32>, tensor<8x2x16x8xf32> -> tensor<8x2x16x16xf32>
    %79 = nn.broadcast %59 dims = [2, 3] : tensor<16x16xf32> -> tensor<8x2x16x16xf32>
    %80 = nn.mul %74, %79 : tensor<8x2x16x16xf32>
    %81 = nn.broadcast %58 dims = [2, 3] : tensor<16x16xf32> -> tensor<8x2x16x16xf32>
    %82 = nn.mul %78, %81 : tensor<8x2x16x16xf32>
    %83 = nn.add %80, %82 : tensor<8x2x16x16xf32>
    %84 = nn.dot %50, %arg15 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x32xf32>) -> tensor<8x16x32xf32>
    %85 = nn.reshape %84 : tensor<8x16x32xf32> -> tensor<8x16x2x16xf32>
    %86 = nn.transpose %85 permutation = [0, 2, 1, 3] : tensor<8x16x2x16xf32> -> tensor<8x2x16x16xf32>
    %87 = nn.attention %71, %83, %86 causal = true scale = 2.500000e-01 : (tensor<8x4x16x16xf32>, tensor<8x2x16x16xf32>, tensor<8x2x16x16xf32>) -> tensor<8x4x16x16xf32>
    %88 = nn.transpose %87 permutation = [0, 2, 1, 3] : tensor<8x4x16x16xf32> -> tensor<8x16x4x16xf32>
    %89 = nn.reshape %88 : tensor<8x16x4x16xf32> -> tensor<8x16x64xf32>
    %90 = nn.dot %89, %arg16 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x64xf32>) -> tensor<8x16x64xf32>
    %91 = nn.add %49, %90 : tensor<8x16x64xf32>
    %92 = nn.rms_norm %91, %arg17 epsilon = 9.99999974E-6 : tensor<8x16x64xf32>, tensor<64xf32>
    %93 = nn.dot %92, %arg18 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x128xf32>) -> tensor<8x16x128xf32>
    %94 = nn.silu %93 : tensor<8x16x128xf32>
    %95 = nn.dot %92, %arg20 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x128xf32>) -> tensor<8x16x128xf32>
    %96 = nn.mul %94, %95 : tensor<8x16x128xf32>
    %97 = nn.dot %96, %arg19 contracting_dims = [2] x [0] : (tensor<8x16x128xf32>, tensor<128x64xf32>) -> tensor<8x16x64xf32>
    %98 = nn.add %91, %97 : tensor<8x16x64xf32>
    %99 = nn.rms_norm %98, %arg21 epsilon = 9.99999974E-6 : tensor<8x16x64xf32>, tensor<64xf32>
    %100 = nn.dot %99, %arg22 contracting_dims = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x256xf32>) -> tensor<8x16x256xf32>
    %101 = nn.cross_entropy %100, %arg1 : tensor<8x16x256xf32>, tensor<8x16xi32>
    %102 = nn.reduce_mean %101 dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
    return %102 : tensor<f32>
  }
}

