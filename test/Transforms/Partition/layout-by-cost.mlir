// RUN: tessera-opt %s --split-input-file --tessera-propagate --tessera-partition | FileCheck %s
// RUN: tessera-opt %s --split-input-file --tessera-propagate --tessera-partition=explain=true 2>&1 >/dev/null | FileCheck %s --check-prefix=EXPLAIN
// RUN: tessera-opt %s --split-input-file --tessera-propagate --tessera-partition="explain=true machine=dgx-h100" 2>&1 >/dev/null | FileCheck %s --check-prefix=MACHINE
// RUN: not tessera-opt %s --split-input-file --tessera-propagate --tessera-partition=machine=no-such-machine 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// Tests that the partitioner lays out each op's factors at the lowest cost
// of the reshards around it (issue 17, item 3), as GSPMD's dot handler
// weighs its strategies. Bytes are what each device sends (ring algorithms).

// UNKNOWN: error: cannot load machine 'no-such-machine'

// A weight-stationary matmul: the activation's hidden dim and the weight's
// columns are both split over "x". Splitting the contracting dim (the
// default) moved the weight with an all_to_all and reduce-scattered the
// product: 18432 bytes. Keeping the weight where it is gathers the
// activation: 1536 bytes.
// CHECK-LABEL: func.func @weight_stationary
// CHECK-SAME: %[[X:[^:]+]]: tensor<8x16xf32>
// CHECK-SAME: %[[W:[^:]+]]: tensor<64x64xf32>
// CHECK-NEXT: %[[XG:.+]] = dist.all_gather %[[X]] on @m ["x"] dim = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
// CHECK-NEXT: %[[Y:.+]] = nn.dot %[[XG]], %[[W]] {{.+}} -> tensor<8x64xf32>
// CHECK-NEXT: return %[[Y]]
// EXPLAIN: remark: factor layout chosen by cost: i={} j={"x"} k={} (sends 1536 bytes per device); also priced: i={} j={} k={"x"} (sends 18432 bytes per device)
// MACHINE: remark: factor layout chosen by cost: i={} j={"x"} k={} (sends 1536 bytes per device, {{[0-9.]+}} us); also priced: i={} j={} k={"x"} (sends 18432 bytes per device, {{[0-9.]+}} us)
dist.mesh @m ["x"=4]
func.func @weight_stationary(%x: tensor<8x64xf32> {dist.sharding = #dist.sharding<@m, [{}, {"x"}]>},
                             %w: tensor<64x256xf32> {dist.sharding = #dist.sharding<@m, [{}, {"x"}]>})
    -> tensor<8x256xf32> {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x64xf32>, tensor<64x256xf32>) -> tensor<8x256xf32>
  return %y : tensor<8x256xf32>
}

// -----

// A weight-stationary MLP on 2x2 devices (2-D tensor parallelism: each
// weight split on both dims). Before, both weights were gathered and the
// products reduce-scattered: 75776 bytes. Now only activations move (an
// all_gather, two all_reduces and an all_gather): 14336 bytes.
// CHECK-LABEL: func.func @weight_stationary_mlp
// CHECK-SAME: %[[W1:[^:]+]]: tensor<32x128xf32>
// CHECK-SAME: %[[W2:[^:]+]]: tensor<128x32xf32>
// CHECK-NOT: dist.{{.+}} %[[W1]]
// CHECK-NOT: dist.{{.+}} %[[W2]]
// CHECK: nn.dot %{{.+}}, %[[W1]]
// CHECK: dist.all_reduce %{{.+}} on @m ["y"] sum : tensor<16x128xf32>
// CHECK: nn.dot %{{.+}}, %[[W2]]
// CHECK: dist.all_reduce %{{.+}} on @m ["x"] sum : tensor<16x32xf32>
// EXPLAIN: remark: factor layout chosen by cost: i={} j={"x"} k={"y"} (sends 10240 bytes per device)
// EXPLAIN: remark: factor layout chosen by cost: i={} j={"y"} k={"x"} (sends 4096 bytes per device)
dist.mesh @m ["x"=2, "y"=2]
func.func @weight_stationary_mlp(%x: tensor<16x64xf32> {dist.sharding = #dist.sharding<@m, [{}, {"x"}]>},
                                 %w1: tensor<64x256xf32> {dist.sharding = #dist.sharding<@m, [{"y"}, {"x"}]>},
                                 %w2: tensor<256x64xf32> {dist.sharding = #dist.sharding<@m, [{"x"}, {"y"}]>})
    -> (tensor<16x64xf32> {dist.sharding = #dist.sharding<@m, [{}, {"x"}]>}) {
  %h = nn.dot %x, %w1 contracting_dims = [1] x [0] : (tensor<16x64xf32>, tensor<64x256xf32>) -> tensor<16x256xf32>
  %r = nn.relu %h : tensor<16x256xf32>
  %y = nn.dot %r, %w2 contracting_dims = [1] x [0] : (tensor<16x256xf32>, tensor<256x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

// A weight gradient summed over a batch split over "x": reduce-scattering
// the partial gradient (768 bytes) beats moving both activations to split
// the gradient's rows (3840 bytes), so the default stays.
// CHECK-LABEL: func.func @gradient_reduce_scattered
// CHECK: nn.dot
// CHECK-NEXT: dist.reduce_scatter %{{.+}} on @m ["x"] dim = 0 sum : tensor<16x16xf32> -> tensor<4x16xf32>
// EXPLAIN: remark: factor layout chosen by cost: i={} j={} k={"x"} (sends 768 bytes per device); also priced: i={"x"} j={} k={} (sends 3840 bytes per device)
dist.mesh @m ["x"=4]
func.func @gradient_reduce_scattered(%x: tensor<64x16xf32> {dist.sharding = #dist.sharding<@m, [{"x"}, {}]>},
                                     %dy: tensor<64x16xf32> {dist.sharding = #dist.sharding<@m, [{"x"}, {}]>})
    -> (tensor<16x16xf32> {dist.sharding = #dist.sharding<@m, [{"x"}, {}]>}) {
  %dw = nn.dot %x, %dy contracting_dims = [0] x [0] : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<16x16xf32>
  return %dw : tensor<16x16xf32>
}

// -----

// The batch-split activation times a replicated weight, wanted replicated:
// keeping the activation's split would gather the product (1536 bytes);
// gathering the activation and computing whole (the default) sends 384.
// EXPLAIN: remark: factor layout chosen by cost: i={} j={} k={} (sends 384 bytes per device); also priced: i={"x"} j={} k={} (sends 1536 bytes per device)
// CHECK-LABEL: func.func @activation_gathered
// CHECK-NEXT: dist.all_gather %{{.+}} on @m ["x"] dim = 0 : tensor<2x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: nn.dot
// CHECK-NEXT: return
dist.mesh @m ["x"=4]
func.func @activation_gathered(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@m, [{"x"}, {}]>},
                            %w: tensor<16x64xf32> {dist.sharding = #dist.sharding<@m, [{}, {}]>})
    -> (tensor<8x64xf32> {dist.sharding = #dist.sharding<@m, [{}, {}]>}) {
  %y = nn.dot %x, %w contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}
