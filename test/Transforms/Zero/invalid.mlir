// RUN: tessera-opt %s --split-input-file --tessera-zero -verify-diagnostics

// Tests that ZeRO wants a mesh to split over.
// expected-error @+1 {{ZeRO needs a mesh: annotate the train step's data-parallel axis}}
func.func @no_mesh(%w: tensor<8xf32>, %g: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>, %t: tensor<i64>) -> tensor<8xf32> {
  %w2, %m2, %v2 = nn.adamw %w, %g, %m, %v, %t lr = 1.0e-03 : tensor<8xf32>, tensor<8xf32>, tensor<i64>
  return %w2 : tensor<8xf32>
}

// -----

// Tests that ZeRO splits only optimizer state that the train step takes as
// arguments, not moments it computes.
dist.mesh @mesh ["dp"=2]
func.func @moments_computed(%w: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, [{}]>}, %g: tensor<8xf32>, %t: tensor<i64>) -> tensor<8xf32> {
  %zero = nn.constant dense<0.0> : tensor<8xf32>
  // expected-error @+1 {{ZeRO expects the parameter and optimizer state of nn.adamw to be arguments of the train step}}
  %w2, %m2, %v2 = nn.adamw %w, %g, %zero, %zero, %t lr = 1.0e-03 : tensor<8xf32>, tensor<8xf32>, tensor<i64>
  return %w2 : tensor<8xf32>
}
