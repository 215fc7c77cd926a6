// RUN: tessera-opt %s --tessera-propagate="mode=conservative explain=true" -verify-diagnostics -o /dev/null

// Tests that the conservative mode keeps only the common prefix of
// conflicting candidates.
dist.mesh @mesh_x_2_y_2 ["x"=2, "y"=2]
// expected-remark @+2 {{argument #0}}
// expected-remark @+1 {{argument #1}}
func.func @conflict(%small: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{}, {"x"}]>},
                    %large: tensor<16x1024xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2, [{"y"}, {}]>}) -> tensor<8x1024xf32> {
  // expected-remark @+2 {{result #0}}
  // expected-remark @+1 {{conflict on factor k: operand #0 wants {"x"}, operand #1 wants {"y"}; kept {} (conservative: common prefix)}}
  %y = nn.dot %small, %large contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x1024xf32>) -> tensor<8x1024xf32>
  return %y : tensor<8x1024xf32>
}
