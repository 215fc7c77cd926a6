// A value plus uniform noise, split over "dp" and "tp" (for dropout.test).
dist.mesh @mesh ["dp"=2, "tp"=2]
func.func @noise(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}]>},
                 %step: tensor<i64> {nn.state = "step"})
    -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}]>}) {
  %u = nn.random_uniform step %step seed = 5 : tensor<i64> -> tensor<8x16xf32>
  %y = nn.add %x, %u : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
