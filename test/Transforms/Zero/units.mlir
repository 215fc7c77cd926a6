// RUN: tessera-opt %s --split-input-file --tessera-zero=stage=3 | FileCheck %s
// RUN: tessera-opt %s --split-input-file --tessera-zero=stage=3 --tessera-propagate --tessera-partition | FileCheck %s --check-prefix=PARTITIONED
// RUN: tessera-opt %s --split-input-file --tessera-zero="stage=3 units=false" | FileCheck %s --check-prefix=APART

// Tests that the two parameters of unit "fc" (and each of their moments)
// become one flat buffer of 4·4 + 4 elements, FSDP's FlatParameter: one
// argument listing its members by their index in the step, read as a view
// (slice, reshape) per member and phase, which stage 3 gathers once per
// phase; the update reads the members' gradients concatenated, and returns
// the unit's buffers in place of the members'. "head.w", alone in its unit,
// keeps its own buffer.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>, dist.source_index = 0 : i64}
// CHECK-SAME: nn.param = "head.w"
// CHECK-SAME: %[[STEP:[^:]+]]: tensor<i64> {dist.source_index = 9 : i64, nn.state = "step"}
// CHECK-SAME: %[[FC:[^:]+]]: tensor<20xf32> {dist.members = [{name = "fc.w", shape = array<i64: 4, 4>, source = 1 : i64}, {name = "fc.b", shape = array<i64: 4>, source = 2 : i64}], dist.sharding = #dist.sharding<@mesh, [{}], flat={"dp"}>, nn.param = "fc"}
// CHECK-SAME: %[[M:[^:]+]]: tensor<20xf32> {dist.members = [{name = "fc.w.adam_m", shape = array<i64: 4, 4>, source = 3 : i64}, {name = "fc.b.adam_m", shape = array<i64: 4>, source = 5 : i64}], dist.sharding = #dist.sharding<@mesh, [{}], flat={"dp"}>, nn.state = "fc.adam_m"}
// CHECK-SAME: %[[V:[^:]+]]: tensor<20xf32> {dist.members = [{name = "fc.w.adam_v", shape = array<i64: 4, 4>, source = 4 : i64}, {name = "fc.b.adam_v", shape = array<i64: 4>, source = 6 : i64}], dist.sharding = #dist.sharding<@mesh, [{}], flat={"dp"}>, nn.state = "fc.adam_v"}
// CHECK-SAME: -> (tensor<4x4xf32> {dist.source_index = 6 : i64, nn.updates = 1 : i64}
// CHECK-SAME: tensor<20xf32> {dist.members = [{name = "fc.w", shape = array<i64: 4, 4>, source = 0 : i64}, {name = "fc.b", shape = array<i64: 4>, source = 1 : i64}], nn.updates = 5 : i64}
// CHECK: %[[FF:.+]] = dist.sharding_constraint %[[FC]] <@mesh, [{}], replicated={"dp"}>
// CHECK: %[[W:.+]] = nn.slice %[[FF]] start = [0] limit = [16]
// CHECK: nn.reshape %[[W]] : tensor<16xf32> -> tensor<4x4xf32>
// CHECK: %[[B:.+]] = nn.slice %[[FF]] start = [16] limit = [20]
// CHECK: %[[FB:.+]] = dist.sharding_constraint %[[FC]] <@mesh, [{}], replicated={"dp"}>
// CHECK: nn.slice %[[FB]] start = [0] limit = [16]
// CHECK: %[[G:.+]] = nn.concat %{{.+}}, %{{.+}} dim = 0 : tensor<16xf32>, tensor<4xf32> -> tensor<20xf32>
// CHECK-NEXT: %[[GS:.+]] = dist.sharding_constraint %[[G]] <@mesh, [{}], flat={"dp"}>
// CHECK: nn.adamw %[[FC]], %[[GS]], %[[M]], %[[V]], %[[STEP]] {{.+}} : tensor<20xf32>, tensor<20xf32>, tensor<i64>
// CHECK-NOT: nn.adamw {{.+}} : tensor<4xf32>

// Partitioned: one gather of the unit's 10-element share per phase, one
// reduce-scatter of its gradient, one update of the share.
// PARTITIONED-LABEL: func.func @step
// PARTITIONED: dist.all_gather %{{.+}} on @mesh ["dp"] dim = 0 : tensor<10xf32> -> tensor<20xf32>
// PARTITIONED: dist.all_gather %{{.+}} on @mesh ["dp"] dim = 0 : tensor<10xf32> -> tensor<20xf32>
// PARTITIONED: dist.reduce_scatter %{{.+}} on @mesh ["dp"] dim = 0 sum : tensor<20xf32> -> tensor<10xf32>
// PARTITIONED: nn.adamw {{.+}} : tensor<10xf32>, tensor<10xf32>, tensor<i64>

// APART-LABEL: func.func @step
// APART-NOT: dist.members
// APART-COUNT-3: nn.adamw
dist.mesh @mesh ["dp"=2]
func.func @step(%x: tensor<2x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
                %w: tensor<4x4xf32> {nn.param = "fc.w"},
                %b: tensor<4xf32> {nn.param = "fc.b"},
                %mw: tensor<4x4xf32> {nn.state = "fc.w.adam_m"},
                %vw: tensor<4x4xf32> {nn.state = "fc.w.adam_v"},
                %mb: tensor<4xf32> {nn.state = "fc.b.adam_m"},
                %vb: tensor<4xf32> {nn.state = "fc.b.adam_v"},
                %h: tensor<4x4xf32> {nn.param = "head.w"},
                %mh: tensor<4x4xf32> {nn.state = "head.w.adam_m"},
                %t: tensor<i64> {nn.state = "step"},
                %vh: tensor<4x4xf32> {nn.state = "head.w.adam_v"})
    -> (tensor<4x4xf32> {nn.updates = 1 : i64}, tensor<4xf32> {nn.updates = 2 : i64},
        tensor<4x4xf32> {nn.updates = 3 : i64}, tensor<4x4xf32> {nn.updates = 4 : i64},
        tensor<4xf32> {nn.updates = 5 : i64}, tensor<4xf32> {nn.updates = 6 : i64},
        tensor<4x4xf32> {nn.updates = 7 : i64}, tensor<4x4xf32> {nn.updates = 8 : i64},
        tensor<4x4xf32> {nn.updates = 10 : i64}, tensor<2x4xf32>) {
  %y0 = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
  %y1 = nn.add %y0, %bb : tensor<2x4xf32>
  %y = nn.dot %y1, %h contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %dy1 = nn.dot %y, %h contracting_dims = [1] x [1] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %dh = nn.dot %y1, %y contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %dx = nn.dot %dy1, %w contracting_dims = [1] x [1] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %dw = nn.dot %x, %dx contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %db = nn.reduce_sum %dy1 dims = [0] : tensor<2x4xf32> -> tensor<4xf32>
  %w2, %mw2, %vw2 = nn.adamw %w, %dw, %mw, %vw, %t lr = 1.0e-03 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>
  %b2, %mb2, %vb2 = nn.adamw %b, %db, %mb, %vb, %t lr = 1.0e-03 : tensor<4xf32>, tensor<4xf32>, tensor<i64>
  %h2, %mh2, %vh2 = nn.adamw %h, %dh, %mh, %vh, %t lr = 1.0e-03 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>
  return %w2, %b2, %mw2, %vw2, %mb2, %vb2, %h2, %mh2, %vh2, %y : tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>
}

// -----

// Tests that the parameters of a unit split on one dim each by "tp" are one
// buffer of a row per TP device, [2, (4·4 + 4 + 4·4) / 2]: row r holds each
// member's r-th TP piece. The model reads a member split on dim 1 as the
// rows' slice, laid out [2, 4, 2], its rows moved to dim 1 and merged; its
// gradient goes the other way, and the rows concatenate on dim 1.
// CHECK-LABEL: func.func @rows
// CHECK-SAME: %[[U:[^:]+]]: tensor<2x18xf32> {dist.members = [{dim = 1 : i64, name = "fc.w", shape = array<i64: 4, 4>, source = 1 : i64}, {dim = 0 : i64, name = "fc.b", shape = array<i64: 4>, source = 2 : i64}, {dim = 0 : i64, name = "fc.v", shape = array<i64: 4, 4>, source = 3 : i64}], dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}], flat={"dp"}>, nn.param = "fc"}
// CHECK: %[[F:.+]] = dist.sharding_constraint %[[U]] <@mesh, [{"tp"}, {}], replicated={"dp"}>
// CHECK: %[[W:.+]] = nn.slice %[[F]] start = [0, 0] limit = [2, 8] : tensor<2x18xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[WR:.+]] = nn.reshape %[[W]] : tensor<2x8xf32> -> tensor<2x4x2xf32>
// CHECK-NEXT: %[[WT:.+]] = nn.transpose %[[WR]] permutation = [1, 0, 2] : tensor<2x4x2xf32> -> tensor<4x2x2xf32>
// CHECK-NEXT: nn.reshape %[[WT]] : tensor<4x2x2xf32> -> tensor<4x4xf32>
// CHECK: nn.slice %[[F]] start = [0, 10] limit = [2, 18] : tensor<2x18xf32> -> tensor<2x8xf32>
// CHECK: %[[GW:.+]] = nn.reshape %{{.+}} : tensor<4x4xf32> -> tensor<4x2x2xf32>
// CHECK-NEXT: %[[GT:.+]] = nn.transpose %[[GW]] permutation = [1, 0, 2] : tensor<4x2x2xf32> -> tensor<2x4x2xf32>
// CHECK-NEXT: %[[GR:.+]] = nn.reshape %[[GT]] : tensor<2x4x2xf32> -> tensor<2x8xf32>
// CHECK: nn.concat %[[GR]], %{{.+}}, %{{.+}} dim = 1 : tensor<2x8xf32>, tensor<2x2xf32>, tensor<2x8xf32> -> tensor<2x18xf32>
// CHECK: nn.adamw %[[U]], {{.+}} : tensor<2x18xf32>, tensor<2x18xf32>, tensor<i64>

// Partitioned: a device's piece of its row is 9 elements; one gather of
// the row, one reduce-scatter of its gradient.
// PARTITIONED-LABEL: func.func @rows
// PARTITIONED: dist.all_gather %{{.+}} on @mesh ["dp"] dim = 0 : tensor<9xf32> -> tensor<18xf32>
// PARTITIONED: dist.reduce_scatter %{{.+}} on @mesh ["dp"] dim = 0 sum : tensor<18xf32> -> tensor<9xf32>
// PARTITIONED: nn.adamw {{.+}} : tensor<9xf32>, tensor<9xf32>, tensor<i64>
dist.mesh @mesh ["dp"=2, "tp"=2]
func.func @rows(%x: tensor<2x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
                %w: tensor<4x4xf32> {nn.param = "fc.w", dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>},
                %b: tensor<4xf32> {nn.param = "fc.b", dist.sharding = #dist.sharding<@mesh, [{"tp"}]>},
                %v: tensor<4x4xf32> {nn.param = "fc.v", dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>},
                %mw: tensor<4x4xf32> {nn.state = "fc.w.adam_m"},
                %vw: tensor<4x4xf32> {nn.state = "fc.w.adam_v"},
                %mb: tensor<4xf32> {nn.state = "fc.b.adam_m"},
                %vb: tensor<4xf32> {nn.state = "fc.b.adam_v"},
                %mv: tensor<4x4xf32> {nn.state = "fc.v.adam_m"},
                %vv: tensor<4x4xf32> {nn.state = "fc.v.adam_v"},
                %t: tensor<i64> {nn.state = "step"})
    -> (tensor<4x4xf32> {nn.updates = 1 : i64}, tensor<4xf32> {nn.updates = 2 : i64},
        tensor<4x4xf32> {nn.updates = 3 : i64}, tensor<4x4xf32> {nn.updates = 4 : i64},
        tensor<4x4xf32> {nn.updates = 5 : i64}, tensor<4xf32> {nn.updates = 6 : i64},
        tensor<4xf32> {nn.updates = 7 : i64}, tensor<4x4xf32> {nn.updates = 8 : i64},
        tensor<4x4xf32> {nn.updates = 9 : i64}, tensor<2x4xf32>) {
  %h0 = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %bb = nn.broadcast %b dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
  %h = nn.add %h0, %bb : tensor<2x4xf32>
  %y = nn.dot %h, %v contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %dh = nn.dot %y, %v contracting_dims = [1] x [1] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %dv = nn.dot %h, %y contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %dw = nn.dot %x, %dh contracting_dims = [0] x [0] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %db = nn.reduce_sum %dh dims = [0] : tensor<2x4xf32> -> tensor<4xf32>
  %w2, %mw2, %vw2 = nn.adamw %w, %dw, %mw, %vw, %t lr = 1.0e-03 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>
  %b2, %mb2, %vb2 = nn.adamw %b, %db, %mb, %vb, %t lr = 1.0e-03 : tensor<4xf32>, tensor<4xf32>, tensor<i64>
  %v2, %mv2, %vv2 = nn.adamw %v, %dv, %mv, %vv, %t lr = 1.0e-03 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>
  return %w2, %b2, %mw2, %vw2, %v2, %mb2, %vb2, %mv2, %vv2, %y : tensor<4x4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>
}
