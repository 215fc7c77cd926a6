// RUN: tessera-opt %s --tessera-partition -verify-diagnostics

// Tests that partitioning a sharded function whose ops carry no shardings of
// their results asks for --tessera-propagate first.
dist.mesh @mesh_dp_2 ["dp"=2]
func.func @unpropagated(
    %x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_2, [{"dp"}, {}]>})
    -> tensor<8x16xf32> {
  // expected-error @+1 {{has no sharding of its results; run --tessera-propagate before --tessera-partition}}
  %y = nn.relu %x : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
