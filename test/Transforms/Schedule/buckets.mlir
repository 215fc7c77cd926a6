// RUN: tessera-opt %s --split-input-file --tessera-schedule="prefetch=0 bucket-bytes=200" | FileCheck %s

// Tests that small reductions become buckets of about bucket-bytes:
// two 128-byte reduce_scatters (along dim 0, each viewed as [group, rest])
// fill one bucket; a 64- and a 128-byte all_reduce share the second, closed
// at the end. Each member's result is sliced back out.
dist.mesh @mesh ["dp"=4]
// CHECK-LABEL: func.func @grads
// CHECK: %[[A:.+]] = nn.relu %arg0
// CHECK-NEXT: %[[B:.+]] = nn.neg %[[A]]
// CHECK-NEXT: %[[VA:.+]] = nn.reshape %[[A]] : tensor<8x4xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[VB:.+]] = nn.reshape %[[B]] : tensor<8x4xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[P:.+]] = nn.concat %[[VA]], %[[VB]] dim = 1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[S:.+]] = dist.reduce_scatter %[[P]] on @mesh ["dp"] dim = 0 sum : tensor<4x16xf32> -> tensor<1x16xf32>
// CHECK-NEXT: %[[SA:.+]] = nn.slice %[[S]] start = [0, 0] limit = [1, 8]
// CHECK-NEXT: %[[RA:.+]] = nn.reshape %[[SA]] : tensor<1x8xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %[[SB:.+]] = nn.slice %[[S]] start = [0, 8] limit = [1, 16]
// CHECK-NEXT: %[[RB:.+]] = nn.reshape %[[SB]] : tensor<1x8xf32> -> tensor<2x4xf32>
// CHECK: %[[Q:.+]] = nn.concat %{{.+}}, %{{.+}} dim = 1 : tensor<1x16xf32>, tensor<1x32xf32> -> tensor<1x48xf32>
// CHECK-NEXT: %[[R:.+]] = dist.all_reduce %[[Q]] on @mesh ["dp"] sum : tensor<1x48xf32>
// CHECK: return %[[RA]], %[[RB]],
func.func @grads(%x: tensor<8x4xf32>, %y: tensor<2x8xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x8xf32>, tensor<8x4xf32>) {
  %a = nn.relu %x : tensor<8x4xf32>
  %sa = dist.reduce_scatter %a on @mesh ["dp"] dim = 0 sum : tensor<8x4xf32> -> tensor<2x4xf32>
  %b = nn.neg %a : tensor<8x4xf32>
  %sb = dist.reduce_scatter %b on @mesh ["dp"] dim = 0 sum : tensor<8x4xf32> -> tensor<2x4xf32>
  %r = dist.all_reduce %y on @mesh ["dp"] sum : tensor<2x8xf32>
  %big = dist.all_reduce %x on @mesh ["dp"] sum : tensor<8x4xf32>
  return %sa, %sb, %r, %big : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x8xf32>, tensor<8x4xf32>
}

// -----

// Tests that a bucket closes before an op that reads one of its members
// (the read of %r0 keeps it out of a bucket with %r1), that reductions of
// another kind or scatter dim are not mixed in, and that one too large
// stays alone.
dist.mesh @mesh ["dp"=4]
// CHECK-LABEL: func.func @closes
// CHECK: %[[R0:.+]] = dist.all_reduce %arg0 on @mesh ["dp"] sum : tensor<2x8xf32>
// CHECK-NEXT: nn.relu %[[R0]]
// CHECK-NEXT: dist.all_reduce %arg0 on @mesh ["dp"] max
// CHECK-NEXT: dist.reduce_scatter %arg1 on @mesh ["dp"] dim = 1 sum
// CHECK-NEXT: dist.all_reduce %arg2 on @mesh ["dp"] sum : tensor<8x8xf32>
// CHECK-NOT: nn.concat
func.func @closes(%x: tensor<2x8xf32>, %z: tensor<2x8xf32>, %big: tensor<8x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x2xf32>, tensor<8x8xf32>) {
  %r0 = dist.all_reduce %x on @mesh ["dp"] sum : tensor<2x8xf32>
  %u = nn.relu %r0 : tensor<2x8xf32>
  %m = dist.all_reduce %x on @mesh ["dp"] max : tensor<2x8xf32>
  %s = dist.reduce_scatter %z on @mesh ["dp"] dim = 1 sum : tensor<2x8xf32> -> tensor<2x2xf32>
  %r1 = dist.all_reduce %big on @mesh ["dp"] sum : tensor<8x8xf32>
  return %u, %m, %s, %r1 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x2xf32>, tensor<8x8xf32>
}
