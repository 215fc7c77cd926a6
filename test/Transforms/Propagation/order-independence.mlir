// RUN: tessera-opt %s --split-input-file --tessera-propagate | FileCheck %s
// RUN: tessera-opt %s --split-input-file --tessera-propagate --tessera-partition | FileCheck %s --check-prefix=PARTITIONED
// RUN: tessera-opt %s --split-input-file --tessera-propagate=explain=true 2>&1 >/dev/null | FileCheck %s --check-prefix=EXPLAIN

// Tests that propagation's outcome does not depend on the order of the ops
// (issue 17, item 4): ops visited in one wave read the shardings as the wave
// found them, and their proposals are settled per value after it.

// %y is read by a constraint that wants "a" on its columns and by two ops
// whose other operands have "a" on the rows. Before, the op met first
// decided: with the constraint first, %y took the columns, and both the add
// and the sub resharded it (2 all_to_alls, 128 bytes sent per device); with
// it last, %y took the rows. Now the rows win in both orders, as two of the
// three readers want them, and only the constraint reshards (1 all_to_all,
// 64 bytes).
// CHECK-LABEL: func.func @constraint_first
// CHECK: nn.relu %{{.+}} {dist.sharding = [#dist.sharding<@m, [{"a"}, {}]>]}
// CHECK-LABEL: func.func @constraint_last
// CHECK: nn.relu %{{.+}} {dist.sharding = [#dist.sharding<@m, [{"a"}, {}]>]}
// EXPLAIN: :[[#@LINE+11]]:8: remark: result #0 settled between ops on dim 1: {{.+}}:[[#@LINE+12]]:8) wants {"a"}; kept {} (the proposal most agree with, then more axes, then the mesh's order; no axis an earlier dim has)
// PARTITIONED-LABEL: func.func @constraint_first
// PARTITIONED-COUNT-1: dist.all_to_all
// PARTITIONED-NOT: = dist.
// PARTITIONED-LABEL: func.func @constraint_last
// PARTITIONED-COUNT-1: dist.all_to_all
// PARTITIONED-NOT: = dist.
dist.mesh @m ["a"=2, "b"=2]
func.func @constraint_first(%x: tensor<8x8xf32>, %w: tensor<8x8xf32> {dist.sharding = #dist.sharding<@m, [{"a"}, {}]>},
                            %v: tensor<8x8xf32> {dist.sharding = #dist.sharding<@m, [{"a"}, {}]>})
    -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %y = nn.relu %x : tensor<8x8xf32>
  %c = dist.sharding_constraint %y <@m, [{}, {"a"}]> : tensor<8x8xf32>
  %e = nn.exp %c : tensor<8x8xf32>
  %s = nn.add %y, %w : tensor<8x8xf32>
  %t = nn.sub %y, %v : tensor<8x8xf32>
  return %e, %s, %t : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
func.func @constraint_last(%x: tensor<8x8xf32>, %w: tensor<8x8xf32> {dist.sharding = #dist.sharding<@m, [{"a"}, {}]>},
                           %v: tensor<8x8xf32> {dist.sharding = #dist.sharding<@m, [{"a"}, {}]>})
    -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %y = nn.relu %x : tensor<8x8xf32>
  %s = nn.add %y, %w : tensor<8x8xf32>
  %t = nn.sub %y, %v : tensor<8x8xf32>
  %c = dist.sharding_constraint %y <@m, [{}, {"a"}]> : tensor<8x8xf32>
  %e = nn.exp %c : tensor<8x8xf32>
  return %e, %s, %t : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// One reader for each: the tie goes to the first dim whatever the order
// (before, to the op met first: %y took the columns with the constraint
// first). Either way one all_to_all.
// CHECK-LABEL: func.func @tie_constraint_first
// CHECK: nn.relu %{{.+}} {dist.sharding = [#dist.sharding<@m, [{"a"}, {}]>]}
// CHECK-LABEL: func.func @tie_constraint_last
// CHECK: nn.relu %{{.+}} {dist.sharding = [#dist.sharding<@m, [{"a"}, {}]>]}
// PARTITIONED-LABEL: func.func @tie_constraint_first
// PARTITIONED-COUNT-1: dist.all_to_all
// PARTITIONED-LABEL: func.func @tie_constraint_last
// PARTITIONED-COUNT-1: dist.all_to_all
dist.mesh @m ["a"=2, "b"=2]
func.func @tie_constraint_first(%x: tensor<8x8xf32>, %w: tensor<8x8xf32> {dist.sharding = #dist.sharding<@m, [{"a"}, {}]>})
    -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %y = nn.relu %x : tensor<8x8xf32>
  %c = dist.sharding_constraint %y <@m, [{}, {"a"}]> : tensor<8x8xf32>
  %e = nn.exp %c : tensor<8x8xf32>
  %s = nn.add %y, %w : tensor<8x8xf32>
  return %s, %e : tensor<8x8xf32>, tensor<8x8xf32>
}
func.func @tie_constraint_last(%x: tensor<8x8xf32>, %w: tensor<8x8xf32> {dist.sharding = #dist.sharding<@m, [{"a"}, {}]>})
    -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %y = nn.relu %x : tensor<8x8xf32>
  %s = nn.add %y, %w : tensor<8x8xf32>
  %c = dist.sharding_constraint %y <@m, [{}, {"a"}]> : tensor<8x8xf32>
  %e = nn.exp %c : tensor<8x8xf32>
  return %s, %e : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Shardings flow forward first: the batch's split reaches %h through three
// ops before the weight gradient's annotation, one op away, may flow back
// into it: %h stays split by the batch (the weight gradient's product claims
// "dp" on its rows, and the dot's layout then moves %h once).
// CHECK-LABEL: func.func @forward_first
// CHECK: %[[H:.+]] = nn.exp %{{.+}} {dist.sharding = [#dist.sharding<@m, [{"dp"}, {}]>]}
// CHECK: nn.dot %[[H]], %{{.+}} {dist.sharding = [#dist.sharding<@m, [{"dp"}, {}]>]}
dist.mesh @m ["dp"=2]
func.func @forward_first(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@m, [{"dp"}, {}]>},
                         %dy: tensor<8x16xf32>)
    -> (tensor<16x16xf32> {dist.sharding = #dist.sharding<@m, [{"dp"}, {}]>}) {
  %a = nn.relu %x : tensor<8x16xf32>
  %b = nn.tanh %a : tensor<8x16xf32>
  %h = nn.exp %b : tensor<8x16xf32>
  %dw = nn.dot %h, %dy contracting_dims = [0] x [0] : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  return %dw : tensor<16x16xf32>
}
