// RUN: tessera-opt %s --split-input-file --tessera-fuse-elementwise | FileCheck %s

// Tests that a bias add and its GELU become one fused op that reads the
// bias through a broadcast, and that a value read outside the group (the
// add, which a later op reads) is a result of it.
// CHECK-LABEL: func.func @bias_gelu
// CHECK-SAME: %[[X:[^:]+]]: tensor<8x64xf32>, %[[B:[^:]+]]: tensor<64xf32>
// CHECK-NEXT: %[[F:.+]]:2 = nn.fused(%[[X]], %[[B]]) : (tensor<8x64xf32>, tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
// CHECK-NEXT: ^bb0(%[[X0:.+]]: tensor<8x64xf32>, %[[B0:.+]]: tensor<64xf32>):
// CHECK-NEXT: %[[BB:.+]] = nn.broadcast %[[B0]] dims = [1]
// CHECK-NEXT: %[[H:.+]] = nn.add %[[X0]], %[[BB]]
// CHECK-NEXT: %[[G:.+]] = nn.gelu %[[H]]
// CHECK-NEXT: nn.yield %[[H]], %[[G]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[S:.+]] = nn.reduce_sum %[[F]]#0
// CHECK-NEXT: return %[[F]]#1, %[[S]]
func.func @bias_gelu(%x: tensor<8x64xf32>, %b: tensor<64xf32>)
    -> (tensor<8x64xf32>, tensor<f32>) {
  %bb = nn.broadcast %b dims = [1] : tensor<64xf32> -> tensor<8x64xf32>
  %h = nn.add %x, %bb : tensor<8x64xf32>
  %g = nn.gelu %h : tensor<8x64xf32>
  %s = nn.reduce_sum %h dims = [0, 1] : tensor<8x64xf32> -> tensor<f32>
  return %g, %s : tensor<8x64xf32>, tensor<f32>
}

// -----

// Tests that a splat constant read by two groups is copied into each, and
// disappears once nothing else reads it; a scale alone fuses with its
// constant too.
// CHECK-LABEL: func.func @constants
// CHECK-NOT: nn.constant
// CHECK: nn.fused
// CHECK-NEXT: ^bb0
// CHECK-NEXT: nn.constant dense<5.000000e-01>
// CHECK-NEXT: nn.mul
// CHECK: nn.dot
// CHECK-NEXT: nn.fused
// CHECK-NEXT: ^bb0
// CHECK-NEXT: nn.constant dense<5.000000e-01>
// CHECK-NEXT: nn.add
// CHECK-NEXT: nn.exp
func.func @constants(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %half = nn.constant dense<5.000000e-01> : tensor<4x4xf32>
  %a = nn.mul %x, %half : tensor<4x4xf32>
  %d = nn.dot %a, %a contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %c = nn.add %d, %half : tensor<4x4xf32>
  %e = nn.exp %c : tensor<4x4xf32>
  return %e : tensor<4x4xf32>
}

// -----

// Tests that a group closes once an op outside it reads one of its values:
// the tanh after the dot that reads %a cannot move %a past the dot, so it
// starts a group of its own (alone, it stays unfused).
// CHECK-LABEL: func.func @closed
// CHECK: %[[F:.+]] = nn.fused
// CHECK: nn.exp
// CHECK-NEXT: nn.yield
// CHECK: nn.dot %[[F]], %[[F]]
// CHECK-NEXT: nn.tanh %[[F]]
func.func @closed(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %n = nn.neg %x : tensor<4x4xf32>
  %a = nn.exp %n : tensor<4x4xf32>
  %d = nn.dot %a, %a contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = nn.tanh %a : tensor<4x4xf32>
  return %d, %t : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Tests that ops with no reader in between join a group across other ops:
// the dot runs first, then the whole chain at its last op.
// CHECK-LABEL: func.func @across
// CHECK-NEXT: %[[D:.+]] = nn.dot
// CHECK-NEXT: %[[F:.+]] = nn.fused(%{{.+}}, %[[D]])
// CHECK: nn.neg
// CHECK-NEXT: nn.add
// CHECK-NEXT: nn.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @across(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %n = nn.neg %x : tensor<4x4xf32>
  %d = nn.dot %x, %x contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = nn.add %n, %d : tensor<4x4xf32>
  return %a : tensor<4x4xf32>
}

// -----

// Tests that no group spans a collective or a pipeline unit's first op:
// the neg before the all_reduce, the exp and tanh after it, and the relu
// that starts unit F1 stay apart.
// CHECK-LABEL: func.func @boundaries
// CHECK-NEXT: nn.neg
// CHECK-NEXT: dist.all_reduce
// CHECK-NEXT: nn.fused
// CHECK-NEXT: ^bb0
// CHECK-NEXT: nn.exp
// CHECK-NEXT: nn.tanh
// CHECK-NEXT: nn.yield
// CHECK-NEXT: }
// CHECK-NEXT: nn.relu {{.*}}dist.unit = "F1"
// CHECK-NEXT: nn.sigmoid
dist.mesh @m ["x"=2]
func.func @boundaries(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %n = nn.neg %x : tensor<4xf32>
  %r = dist.all_reduce %x on @m ["x"] sum : tensor<4xf32>
  %e = nn.exp %n : tensor<4xf32>
  %t = nn.tanh %e : tensor<4xf32>
  %u = nn.relu %t {dist.unit = "F1"} : tensor<4xf32>
  %s = nn.sigmoid %u : tensor<4xf32>
  return %r, %t, %s : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a mask fuses: a float compare, the select it guards and a
// broadcast i1 condition, in bf16 with casts between float types; integer
// compares (of an iota) and f64 math stay out.
// CHECK-LABEL: func.func @mask
// CHECK: nn.iota
// CHECK-NEXT: nn.constant dense<6>
// CHECK-NEXT: nn.compare lt, %{{.+}}, %{{.+}} : tensor<8xi64>
// CHECK-NEXT: %[[F:.+]] = nn.fused
// CHECK-NEXT: ^bb0
// CHECK-NEXT: nn.broadcast
// CHECK-NEXT: nn.constant dense<0.000000e+00> : tensor<8x4xbf16>
// CHECK-NEXT: nn.select
// CHECK-NEXT: nn.compare gt
// CHECK-NEXT: nn.select
// CHECK-NEXT: nn.cast
// CHECK-NEXT: nn.yield
// CHECK: nn.exp %{{.+}} : tensor<8x4xf64>
func.func @mask(%x: tensor<8x4xbf16>, %y: tensor<8x4xbf16>, %z: tensor<8x4xf64>)
    -> (tensor<8x4xf32>, tensor<8x4xf64>) {
  %i = nn.iota dim = 0 : tensor<8xi64>
  %n = nn.constant dense<6> : tensor<8xi64>
  %lt = nn.compare lt, %i, %n : tensor<8xi64>
  %real = nn.broadcast %lt dims = [0] : tensor<8xi1> -> tensor<8x4xi1>
  %zero = nn.constant dense<0.0> : tensor<8x4xbf16>
  %m = nn.select %real, %x, %zero : tensor<8x4xi1>, tensor<8x4xbf16>
  %gt = nn.compare gt, %m, %y : tensor<8x4xbf16>
  %w = nn.select %gt, %m, %y : tensor<8x4xi1>, tensor<8x4xbf16>
  %c = nn.cast %w : tensor<8x4xbf16> to tensor<8x4xf32>
  %e = nn.exp %z : tensor<8x4xf64>
  return %c, %e : tensor<8x4xf32>, tensor<8x4xf64>
}
