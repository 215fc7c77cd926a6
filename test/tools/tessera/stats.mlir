// RUN: tessera stats %s | FileCheck %s
// RUN: not tessera stats %t.missing 2>&1 | FileCheck %s --check-prefix=MISSING

// Tests that `tessera stats` sums parameters, ops, FLOPs and bytes by op.
// CHECK: parameters: 1024
// CHECK: nn.dot 1 16384 6656
// CHECK: nn.relu 1 512 4096
// CHECK: total 2 16896 10752
// MISSING: tessera: error: {{.*}}missing{{.*}}
func.func @f(%x: tensor<8x16xf32>, %w: tensor<16x64xf32> {nn.param = "w"}) -> tensor<8x64xf32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %r = nn.relu %y : tensor<8x64xf32>
  return %r : tensor<8x64xf32>
}
