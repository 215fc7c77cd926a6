// RUN: tessera-opt %s --tessera-split-axes --verify-diagnostics

// Tests that an axis whose parts' names the mesh has already is an error.
// expected-error@+1 {{cannot split axis "tp": the mesh has an axis "tp:(1)2" already}}
dist.mesh @mesh ["tp:(1)2"=2, "tp"=4]
func.func @clash(%q: tensor<2x8x16x8xf32>, %k: tensor<2x2x16x8xf32>) -> tensor<2x8x16x8xf32> {
  %o = nn.attention %q, %k, %k causal = true scale = 0.25 : (tensor<2x8x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x8x16x8xf32>
  return %o : tensor<2x8x16x8xf32>
}
