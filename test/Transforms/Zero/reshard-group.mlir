// RUN: tessera-opt %s --tessera-zero="stage=3 axes=dpo,dpi reshard-after-forward=2" | FileCheck %s
// RUN: tessera-opt %s --tessera-zero="stage=3 axes=dpo,dpi reshard-after-forward=2" --tessera-propagate --tessera-partition | FileCheck %s --check-prefix=PARTITIONED

// Tests that ZeRO-3 reshards to a smaller group after the forward pass (FSDP2's
// reshard_after_forward=int): the forward gathers %w over both ZeRO axes,
// its copy is cut to a split over the trailing axis "dpi" (a group of 2)
// after the last forward read, and the backward gathers over "dpi" alone.
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.+]] = dist.sharding_constraint %arg0 <@mesh, [{?}, {?}], replicated={"dpo", "dpi"}>
// CHECK-NEXT: nn.dot %arg4, %[[F]]
// CHECK-NEXT: %[[K:.+]] = dist.sharding_constraint %[[F]] <@mesh, [{"dpi"}, {?}], replicated={"dpo"}>
// CHECK-NEXT: nn.relu
// CHECK-NEXT: %[[B:.+]] = dist.sharding_constraint %[[K]] <@mesh, [{?}, {?}], replicated={"dpo", "dpi"}>
// CHECK-NEXT: nn.dot %{{.+}}, %[[B]]

// PARTITIONED-LABEL: func.func @step
// PARTITIONED: %[[F:.+]] = dist.all_gather %arg0 on @mesh ["dpo", "dpi"] dim = 0 : tensor<2x4xf32> -> tensor<8x4xf32>
// PARTITIONED-NEXT: nn.dot %arg4, %[[F]]
// PARTITIONED-NEXT: %[[K:.+]] = dist.all_slice %[[F]] on @mesh ["dpi"] dim = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// PARTITIONED-NEXT: nn.relu
// PARTITIONED-NEXT: %[[B:.+]] = dist.all_gather %[[K]] on @mesh ["dpi"] dim = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// PARTITIONED-NEXT: nn.dot %{{.+}}, %[[B]]

dist.mesh @mesh ["dpo"=2, "dpi"=2]
func.func @step(%w: tensor<8x4xf32> {nn.param = "w"},
                %m: tensor<8x4xf32> {nn.state = "w.adam_m"},
                %v: tensor<8x4xf32> {nn.state = "w.adam_v"},
                %t: tensor<i64> {nn.state = "step"},
                %x: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dpo", "dpi"}, {}]>})
    -> (tensor<8x4xf32> {nn.updates = 0 : i64}, tensor<8x4xf32> {nn.updates = 1 : i64},
        tensor<8x4xf32> {nn.updates = 2 : i64}, tensor<4x4xf32>) {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %r = nn.relu %y : tensor<4x4xf32>
  %dx = nn.dot %r, %w contracting_dims = [1] x [1] : (tensor<4x4xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  %dw = nn.dot %dx, %r contracting_dims = [0] x [0] : (tensor<4x8xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %w2, %m2, %v2 = nn.adamw %w, %dw, %m, %v, %t lr = 1.0e-03 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<i64>
  return %w2, %m2, %v2, %r : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<4x4xf32>
}
