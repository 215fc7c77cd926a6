// RUN: tessera-opt %s -split-input-file | tessera-opt -split-input-file | FileCheck %s
// RUN: tessera-opt %s -split-input-file -mlir-print-op-generic | tessera-opt -split-input-file | FileCheck %s

// Tests that meshes and shardings on function arguments and results round-trip.
// CHECK: dist.mesh @mesh_dp_2_tp_4 ["dp"=2, "tp"=4]
dist.mesh @mesh_dp_2_tp_4 ["dp"=2, "tp"=4]
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {}]>}
// CHECK-SAME: {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{}, {"tp"}]>}
// CHECK-SAME: -> (tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {"tp"}]>})
func.func @mlp(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {}]>},
               %w: tensor<16x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{}, {"tp"}]>})
    -> (tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {"tp"}]>}) {
  %y = nn.dot %x, %w contracting_dims = [1] x [0]
      : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

// Tests that open dims, multi-axis dims, priorities, replicated and unreduced
// axes round-trip.
dist.mesh @mesh_x_2_y_2_z_2 ["x"=2, "y"=2, "z"=2]
// CHECK-LABEL: func.func @fields
// CHECK-SAME: #dist.sharding<@mesh_x_2_y_2_z_2, [{"x", "y"}, {?}]>
// CHECK-SAME: #dist.sharding<@mesh_x_2_y_2_z_2, [{"x", ?}p0, {}p2], replicated={"y"}>
// CHECK-SAME: #dist.sharding<@mesh_x_2_y_2_z_2, [{}, {}], replicated={"x"}, unreduced={"y", "z"}>
func.func @fields(
    %a: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2_z_2, [{"x", "y"}, {?}]>},
    %b: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2_z_2, [{"x", ?}p0, {}p2], replicated={"y"}>})
    -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh_x_2_y_2_z_2, [{}, {}], replicated={"x"}, unreduced={"y", "z"}>}) {
  return %a : tensor<8x8xf32>
}

// -----

// Tests that a flat sharding round-trips, on a global tensor and (with its
// global shape) on the 1-d piece a partitioned program holds.
dist.mesh @mesh_dp_3_tp_2 ["pp"=2, "dp"=3, "tp"=2]
// CHECK-LABEL: func.func @flat
// CHECK-SAME: #dist.sharding<@mesh_dp_3_tp_2, [{}, {"tp"}], replicated={"pp"}, flat={"dp"}>
// CHECK-SAME: {dist.global_shape = array<i64: 5, 6>, dist.sharding = #dist.sharding<@mesh_dp_3_tp_2, [{}, {"tp"}], flat={"dp"}>}
func.func @flat(
    %a: tensor<5x6xf32> {dist.sharding = #dist.sharding<@mesh_dp_3_tp_2, [{}, {"tp"}], flat={"dp"}, replicated={"pp"}>},
    %b: tensor<5xf32> {dist.global_shape = array<i64: 5, 6>, dist.sharding = #dist.sharding<@mesh_dp_3_tp_2, [{}, {"tp"}], flat={"dp"}>}) {
  return
}

// -----

// Tests that a scalar has an empty sharding and a one-device mesh is legal.
// CHECK: dist.mesh @single []
dist.mesh @single []
// CHECK-LABEL: func.func @scalar
// CHECK-SAME: #dist.sharding<@single, []>
func.func @scalar(%s: tensor<f32> {dist.sharding = #dist.sharding<@single, []>}) -> tensor<f32> {
  return %s : tensor<f32>
}

// -----

// Tests that a standalone dim sharding attribute round-trips.
// CHECK-LABEL: func.func @dim_sharding
// CHECK: dim = #dist.dim_sharding<{"tp", ?}p3>
func.func @dim_sharding() attributes {dim = #dist.dim_sharding<{"tp", ?}p3>} {
  return
}

// -----

// Tests that sharding constraints and per-result op shardings round-trip.
dist.mesh @mesh_dp_2_tp_4 ["dp"=2, "tp"=4]
// CHECK-LABEL: func.func @constraint
func.func @constraint(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  // CHECK: dist.sharding_constraint %{{.+}} <@mesh_dp_2_tp_4, [{"dp"}, {"tp", ?}]> : tensor<8x64xf32>
  %c = dist.sharding_constraint %x <@mesh_dp_2_tp_4, [{"dp"}, {"tp", ?}]> : tensor<8x64xf32>
  // CHECK: nn.relu %{{.+}} {dist.sharding = [#dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {}]>]}
  %r = nn.relu %c {dist.sharding = [#dist.sharding<@mesh_dp_2_tp_4, [{"dp"}, {}]>]} : tensor<8x64xf32>
  return %r : tensor<8x64xf32>
}

// -----

// Tests that every collective round-trips with its attributes.
dist.mesh @mesh_dp_2_tp_4 ["dp"=2, "tp"=4]
// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<8x16xf32>) {
  // CHECK: dist.all_reduce %{{.+}} on @mesh_dp_2_tp_4 ["tp"] sum : tensor<8x16xf32>
  %0 = dist.all_reduce %x on @mesh_dp_2_tp_4 ["tp"] sum : tensor<8x16xf32>
  // CHECK: dist.all_reduce %{{.+}} on @mesh_dp_2_tp_4 ["dp", "tp"] avg : tensor<8x16xf32>
  %1 = dist.all_reduce %x on @mesh_dp_2_tp_4 ["dp", "tp"] avg : tensor<8x16xf32>
  // CHECK: dist.all_gather %{{.+}} on @mesh_dp_2_tp_4 ["tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
  %2 = dist.all_gather %x on @mesh_dp_2_tp_4 ["tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
  // CHECK: dist.reduce_scatter %{{.+}} on @mesh_dp_2_tp_4 ["tp"] dim = 0 max : tensor<8x16xf32> -> tensor<2x16xf32>
  %3 = dist.reduce_scatter %x on @mesh_dp_2_tp_4 ["tp"] dim = 0 max : tensor<8x16xf32> -> tensor<2x16xf32>
  // CHECK: dist.all_to_all %{{.+}} on @mesh_dp_2_tp_4 ["tp"] split_dim = 0 concat_dim = 1 : tensor<8x16xf32> -> tensor<2x64xf32>
  %4 = dist.all_to_all %x on @mesh_dp_2_tp_4 ["tp"] split_dim = 0 concat_dim = 1 : tensor<8x16xf32> -> tensor<2x64xf32>
  // CHECK: dist.all_slice %{{.+}} on @mesh_dp_2_tp_4 ["dp", "tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x2xf32>
  %5 = dist.all_slice %x on @mesh_dp_2_tp_4 ["dp", "tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x2xf32>
  // CHECK: dist.collective_permute %{{.+}} on @mesh_dp_2_tp_4 ["tp"] pairs = [0, 1, 1, 2, 2, 3, 3, 0] : tensor<8x16xf32>
  %6 = dist.collective_permute %x on @mesh_dp_2_tp_4 ["tp"] pairs = [0, 1, 1, 2, 2, 3, 3, 0] : tensor<8x16xf32>
  // CHECK: dist.broadcast %{{.+}} on @mesh_dp_2_tp_4 ["dp"] root = 1 : tensor<8x16xf32>
  %7 = dist.broadcast %x on @mesh_dp_2_tp_4 ["dp"] root = 1 : tensor<8x16xf32>
  // CHECK: dist.all_reduce %{{.+}} on @mesh_dp_2_tp_4 ["tp"] min : tensor<8x16xbf16>
  %h = nn.cast %x : tensor<8x16xf32> to tensor<8x16xbf16>
  %8 = dist.all_reduce %h on @mesh_dp_2_tp_4 ["tp"] min : tensor<8x16xbf16>
  return
}

// -----

// Tests that a collective started on a stream and its wait round-trip.
dist.mesh @mesh ["dp"=4]
// CHECK-LABEL: func.func @started
// CHECK: %[[G:.+]] = dist.all_gather %{{.+}} on @mesh ["dp"] dim = 0 {dist.stream = 1 : i64} : tensor<2x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: nn.relu
// CHECK-NEXT: %[[W:.+]] = dist.wait %[[G]] : tensor<8x8xf32>
// CHECK-NEXT: return %[[W]]
func.func @started(%w: tensor<2x8xf32>, %x: tensor<4xf32>) -> tensor<8x8xf32> {
  %g = dist.all_gather %w on @mesh ["dp"] dim = 0 {dist.stream = 1 : i64} : tensor<2x8xf32> -> tensor<8x8xf32>
  %y = nn.relu %x : tensor<4xf32>
  %full = dist.wait %g : tensor<8x8xf32>
  return %full : tensor<8x8xf32>
}

// -----

// Tests that pipeline transfers and stage attributes round-trip: a started
// send with its wait, a receive, a stage annotation and a stage function.
dist.mesh @mesh ["pp"=2, "dp"=2]
// CHECK-LABEL: func.func @stage(
// CHECK-SAME: dist.source_index = 3 : i64
// CHECK-SAME: attributes {dist.pipeline_rank = 0 : i64}
// CHECK: %[[S:.+]] = dist.send %{{.+}} on @mesh "pp" to 1 tag 7 {dist.stream = 1 : i64} : tensor<4x8xf32>
// CHECK: %[[R:.+]] = dist.recv on @mesh "pp" from 1 tag 8 : tensor<4x8xf32>
// CHECK: nn.relu %[[R]] {dist.stage = 1 : i64}
// CHECK: dist.wait %[[S]] : tensor<4x8xf32>
func.func @stage(%x: tensor<4x8xf32> {dist.source_index = 3 : i64})
    -> (tensor<4x8xf32> {dist.source_index = 0 : i64})
    attributes {dist.pipeline_rank = 0 : i64} {
  %s = dist.send %x on @mesh "pp" to 1 tag 7 {dist.stream = 1 : i64} : tensor<4x8xf32>
  %r = dist.recv on @mesh "pp" from 1 tag 8 : tensor<4x8xf32>
  %y = nn.relu %r {dist.stage = 1 : i64} : tensor<4x8xf32>
  %done = dist.wait %s : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that a pipeline stage's units, schedule, microbatch slices and
// accumulations round-trip, with a unit send that the schedule waits for.
dist.mesh @mesh ["pp"=2]
// CHECK-LABEL: func.func @units
// CHECK-SAME: dist.schedule = {entries = array<i64: 0, 0, 0, 0, 1, 1>, microbatches = 2 : i64, send_waits = array<i64: 1, 0, 0, 1, 0, 1>, unit_stages = array<i64: 0>, units = ["F0"]}
// CHECK: %[[X:.+]] = dist.microbatch_slice %{{.+}} of 2 {dist.unit = "F0"} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK: dist.send %[[X]] on @mesh "pp" to 1 tag 0 {dist.stream = 1 : i64} : tensor<4x4xf32>
// CHECK: %[[SUM:.+]] = dist.accumulate %[[X]] : tensor<4x4xf32>
// CHECK: nn.relu %[[SUM]] {dist.unit = "update"}
func.func @units(%batch: tensor<8x4xf32>) -> tensor<4x4xf32>
    attributes {dist.pipeline_rank = 0 : i64, dist.schedule = {entries = array<i64: 0, 0, 0, 0, 1, 1>, microbatches = 2 : i64, send_waits = array<i64: 1, 0, 0, 1, 0, 1>, unit_stages = array<i64: 0>, units = ["F0"]}} {
  %x = dist.microbatch_slice %batch of 2 {dist.unit = "F0"} : tensor<8x4xf32> -> tensor<4x4xf32>
  %s = dist.send %x on @mesh "pp" to 1 tag 0 {dist.stream = 1 : i64} : tensor<4x4xf32>
  %sum = dist.accumulate %x : tensor<4x4xf32>
  %y = nn.relu %sum {dist.unit = "update"} : tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// Tests that axis_index round-trips, with an empty group and the time axis
// "mb" of a mesh that no longer has it (a program of pipeline units).
dist.mesh @mesh ["dp"=2, "tp"=2]
// CHECK-LABEL: func.func @axis_index
// CHECK: dist.axis_index @mesh {{\[}}["dp", "mb"], [], ["tp"]] : tensor<3xi64>
func.func @axis_index() -> tensor<3xi64> {
  %i = dist.axis_index @mesh [["dp", "mb"], [], ["tp"]] : tensor<3xi64>
  return %i : tensor<3xi64>
}

// -----

// Tests that the microbatch axis "mb" counts no devices: Megatron-LM's 1T
// GPT (pp=64, dp=6, tp=8: 3072 GPUs) with 512 microbatches, whose product
// of axis sizes (1572864) is past the 2^20 devices a plan runs on.
// CHECK: dist.mesh @mesh_pp_64_dp_6_tp_8_mb_512 ["pp"=64, "dp"=6, "tp"=8, "mb"=512]
dist.mesh @mesh_pp_64_dp_6_tp_8_mb_512 ["pp"=64, "dp"=6, "tp"=8, "mb"=512]

// -----

// Tests that 2^20 devices and 2^20 microbatches together are a valid mesh.
// CHECK: dist.mesh @mesh_dp_1048576_mb_1048576 ["dp"=1048576, "mb"=1048576]
dist.mesh @mesh_dp_1048576_mb_1048576 ["dp"=1048576, "mb"=1048576]
