// RUN: tessera-opt %s --split-input-file --tessera-propagate -verify-diagnostics | FileCheck %s
// RUN: tessera-opt %s --split-input-file --tessera-propagate --tessera-partition -verify-diagnostics | FileCheck %s --check-prefix=PARTITIONED

// Tests that a result that updates an argument (nn.updates, as a train step
// returns new parameters and optimizer state) takes the argument's sharding,
// whatever sharding computed it: here the sum is split over "dp" by %m, the
// new %w is gathered back to %w's replicated layout and the new %m stays
// split. Otherwise the next step would read a state of the wrong shape.
dist.mesh @mesh ["dp"=2]
// CHECK-LABEL: func.func @step
// CHECK-SAME: -> (tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}]>, nn.updates = 0 : i64}, tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>, nn.updates = 1 : i64})
// PARTITIONED-LABEL: func.func @step
// PARTITIONED: %[[SUM:.+]] = nn.add %{{.+}}, %{{.+}} : tensor<4x4xf32>
// PARTITIONED: %[[FULL:.+]] = dist.all_gather %[[SUM]] on @mesh ["dp"] dim = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// PARTITIONED: return %[[FULL]], %[[SUM]]
func.func @step(%w: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}]>},
                %m: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>})
    -> (tensor<8x4xf32> {nn.updates = 0 : i64}, tensor<8x4xf32> {nn.updates = 1 : i64}) {
  %sum = nn.add %w, %m : tensor<8x4xf32>
  return %sum, %sum : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// A result annotated unlike the argument it updates is an error.
dist.mesh @mesh ["dp"=2]
// expected-error @+1 {{result #0 updates argument #0 but is annotated #dist.sharding<@mesh, [{"dp"}, {}]> while the argument is #dist.sharding<@mesh, [{}, {}]>}}
func.func @mismatch(%w: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}]>})
    -> (tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>, nn.updates = 0 : i64}) {
  %twice = nn.add %w, %w : tensor<8x4xf32>
  return %twice : tensor<8x4xf32>
}
