// RUN: tessera-opt %s -split-input-file --tessera-auto-shard | FileCheck %s

// Tests that a large MLP on "tp" is split as Megatron-LM splits it: the first
// weight by columns, the second by rows, the hidden activation split, and the
// output's partial sums completed by one constraint each way (their gradient
// is the sliced output's).
dist.mesh @mesh_tp_4 ["tp"=4]
// CHECK-LABEL: func.func @megatron_mlp
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4096x4096xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {}]>}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<4096x16384xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {"tp"}]>
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<16384x4096xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>
func.func @megatron_mlp(%x: tensor<4096x4096xf32>,
                        %w1: tensor<4096x16384xf32> {nn.param = "w1"},
                        %w2: tensor<16384x4096xf32> {nn.param = "w2"})
    -> tensor<4096x4096xf32> {
  // CHECK: %[[H:.+]] = nn.dot %[[X]], %[[W1]]
  // CHECK: %[[HS:.+]] = dist.sharding_constraint %[[H]] <@mesh_tp_4, [{}, {"tp"}]>
  // CHECK: %[[R:.+]] = nn.relu %[[HS]]
  // CHECK: %[[RS:.+]] = dist.sharding_constraint %[[R]] <@mesh_tp_4, [{}, {"tp"}]>
  // CHECK: %[[Y:.+]] = nn.dot %[[RS]], %[[W2]]
  // CHECK: %[[P:.+]] = dist.sharding_constraint %[[Y]] <@mesh_tp_4, [{}, {}], unreduced={"tp"}>
  // CHECK: %[[YS:.+]] = dist.sharding_constraint %[[P]] <@mesh_tp_4, [{}, {}]>
  // CHECK: return %[[YS]]
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0] : (tensor<4096x4096xf32>, tensor<4096x16384xf32>) -> tensor<4096x16384xf32>
  %r = nn.relu %h : tensor<4096x16384xf32>
  %y = nn.dot %r, %w2 contracting_dims = [1] x [0] : (tensor<4096x16384xf32>, tensor<16384x4096xf32>) -> tensor<4096x4096xf32>
  return %y : tensor<4096x4096xf32>
}

// -----

// Tests that annotations are hard constraints: the first weight pinned split
// by rows keeps its annotation, and its dot reads it resharded by columns
// (one all-to-all, cheaper than completing the [4096, 16384] partial sums
// that contracting the split dim would leave).
dist.mesh @mesh_tp_4 ["tp"=4]
// CHECK-LABEL: func.func @pinned_rows
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<4096x16384xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>
func.func @pinned_rows(%x: tensor<4096x4096xf32>,
                       %w1: tensor<4096x16384xf32> {nn.param = "w1", dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>},
                       %w2: tensor<16384x4096xf32> {nn.param = "w2"})
    -> tensor<4096x4096xf32> {
  // CHECK: %[[WS:.+]] = dist.sharding_constraint %[[W1]] <@mesh_tp_4, [{}, {"tp"}]>
  // CHECK: nn.dot %{{.+}}, %[[WS]]
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0] : (tensor<4096x4096xf32>, tensor<4096x16384xf32>) -> tensor<4096x16384xf32>
  %y = nn.dot %h, %w2 contracting_dims = [1] x [0] : (tensor<4096x16384xf32>, tensor<16384x4096xf32>) -> tensor<4096x4096xf32>
  return %y : tensor<4096x4096xf32>
}

// -----

// Tests that an annotated result is needed as annotated: the output is split
// by rows, so the second dot's partial sums are scattered onto them.
dist.mesh @mesh_tp_4 ["tp"=4]
// CHECK-LABEL: func.func @annotated_result
func.func @annotated_result(%x: tensor<4096x4096xf32>,
                            %w1: tensor<4096x16384xf32> {nn.param = "w1"},
                            %w2: tensor<16384x4096xf32> {nn.param = "w2"})
    -> (tensor<4096x4096xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{"tp"}, {}]>}) {
  // CHECK: %[[Y:.+]] = nn.dot %{{.+}}, %arg2
  // CHECK: %[[P:.+]] = dist.sharding_constraint %[[Y]] <@mesh_tp_4, [{}, {}], unreduced={"tp"}>
  // CHECK: %[[YS:.+]] = dist.sharding_constraint %[[P]] <@mesh_tp_4, [{"tp"}, {}]>
  // CHECK: return %[[YS]]
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0] : (tensor<4096x4096xf32>, tensor<4096x16384xf32>) -> tensor<4096x16384xf32>
  %y = nn.dot %h, %w2 contracting_dims = [1] x [0] : (tensor<4096x16384xf32>, tensor<16384x4096xf32>) -> tensor<4096x4096xf32>
  return %y : tensor<4096x4096xf32>
}

// -----

// Tests that a small program whose result is wanted whole stays whole:
// splitting it saves less compute than gathering the result costs.
dist.mesh @mesh_tp_4 ["tp"=4]
// CHECK-LABEL: func.func @small_stays_whole
// CHECK-SAME: {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {}]>, nn.param = "w"}
// CHECK-NOT: "tp"
func.func @small_stays_whole(%x: tensor<8x16xf32>,
                             %w: tensor<16x16xf32> {nn.param = "w"})
    -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_tp_4, [{}, {}]>}) {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
