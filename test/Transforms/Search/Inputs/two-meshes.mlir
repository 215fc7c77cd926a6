dist.mesh @mesh_a ["tp"=2]
dist.mesh @mesh_b ["tp"=4]
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %y = nn.relu %x : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
