// RUN: tessera-opt %s --split-input-file --tessera-export="text=true output=-" | FileCheck %s

// Tests that a splat constant that kernels read is made again right before
// each of them (two constant kernels, each freed by its reader), so it does
// not live from its definition to its last reader.
// CHECK: op: "nn.constant"
// CHECK: op: "nn.mul"
// CHECK: op: "nn.exp"
// CHECK: op: "nn.constant"
// CHECK: op: "nn.add"
// CHECK-NOT: op: "nn.constant"
// CHECK: source_model: "twice"
func.func @twice(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %half = nn.constant dense<5.000000e-01> : tensor<4x8xf32>
  %a = nn.mul %x, %half : tensor<4x8xf32>
  %b = nn.exp %a : tensor<4x8xf32>
  %c = nn.add %b, %half : tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// -----

// Tests that a constant returned, or read through a view, is made once.
// CHECK: op: "nn.constant"
// CHECK-NOT: op: "nn.constant"
// CHECK: source_model: "returned"
func.func @returned(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %half = nn.constant dense<5.000000e-01> : tensor<4x8xf32>
  %a = nn.mul %x, %half : tensor<4x8xf32>
  return %a, %half : tensor<4x8xf32>, tensor<4x8xf32>
}
