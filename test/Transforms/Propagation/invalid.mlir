// RUN: tessera-opt %s -split-input-file --tessera-propagate -verify-diagnostics

// Tests that the shardings of one function must name one mesh.
dist.mesh @mesh_a ["x"=2]
dist.mesh @mesh_b ["x"=2]
// expected-error @+1 {{expects the shardings of one function on one mesh, got @mesh_a and @mesh_b}}
func.func @two_meshes(%a: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh_a, [{"x"}]>},
                      %b: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh_b, [{"x"}]>}) -> tensor<8xf32> {
  %0 = nn.add %a, %b : tensor<8xf32>
  return %0 : tensor<8xf32>
}
