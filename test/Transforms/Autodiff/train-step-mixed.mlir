// RUN: tessera-opt %s "--tessera-train-step=precision=mixed" | FileCheck %s

// Tests that mixed precision keeps f32 master weights and moments for a
// bf16 parameter, cast down where the model reads it, while data stays bf16;
// the update reads the bf16 gradient (widened as it reads it).
// CHECK-LABEL: func.func @bf16_step
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x8xbf16>, %[[W:[^:]+]]: tensor<8x2xf32> {nn.param = "w"}
// CHECK-SAME: tensor<8x2xf32> {nn.state = "w.adam_m"}
// CHECK: %[[C:.+]] = nn.cast %[[W]] : tensor<8x2xf32> to tensor<8x2xbf16>
// CHECK: nn.dot %[[X]], %[[C]]
// CHECK-NOT: nn.cast %{{.+}} : tensor<8x2xbf16> to tensor<8x2xf32>
// CHECK: nn.adamw %[[W]], %{{.+}} : tensor<8x2xf32>, tensor<8x2xf32>, tensor<i64> grad tensor<8x2xbf16>
func.func @bf16_step(%x: tensor<4x8xbf16>, %w: tensor<8x2xbf16> {nn.param = "w"}) -> tensor<bf16> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<4x8xbf16>, tensor<8x2xbf16>) -> tensor<4x2xbf16>
  %l = nn.reduce_mean %y dims = [0, 1] : tensor<4x2xbf16> -> tensor<bf16>
  return %l : tensor<bf16>
}
