// A model whose tensors hold 2^45 elements: within the 2^50 a model may
// count, past the 2^40 a plan's buffer holds.
func.func @f(%x: tensor<35184372088832xf32>) -> tensor<35184372088832xf32> {
  %y = nn.add %x, %x : tensor<35184372088832xf32>
  return %y : tensor<35184372088832xf32>
}
