// A softmax (scaled) and a log-softmax over a dim split over "tp", which
// --tessera-decompose-split-reductions computes on pieces (vocab-parallel.test).
module {
  dist.mesh @mesh ["tp"=2]
  func.func @f(%x: tensor<4x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>}) -> (tensor<4x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>}, tensor<4x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>}) {
    %a = nn.softmax %x dim = 1 scale = 0.125 : tensor<4x64xf32>
    %b = nn.log_softmax %x dim = 1 : tensor<4x64xf32>
    return %a, %b : tensor<4x64xf32>, tensor<4x64xf32>
  }
}
