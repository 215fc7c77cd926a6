// A dot whose operands hold 2^50 elements each, within the bound on a
// tensor, but whose 2^76 FLOPs overflow int64.
func.func @f(%x: tensor<33554432x33554432xf32>, %w: tensor<33554432x33554432xf32>) -> tensor<33554432x33554432xf32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<33554432x33554432xf32>, tensor<33554432x33554432xf32>) -> tensor<33554432x33554432xf32>
  return %y : tensor<33554432x33554432xf32>
}
