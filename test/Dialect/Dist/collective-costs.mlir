// RUN: tessera-opt %s --tessera-test-op-interfaces -verify-diagnostics -o /dev/null

// Tests that every collective exposes its mesh axes, group size and the bytes
// that leave each device (none for the local all_slice).
dist.mesh @mesh_dp_2_tp_4 ["dp"=2, "tp"=4]
func.func @collectives(%x: tensor<8x16xf32>, %h: tensor<8x16xbf16>) {
  // expected-remark @+1 {{collective: axes=["tp"] group=4 bytes=512}}
  %0 = dist.all_reduce %x on @mesh_dp_2_tp_4 ["tp"] sum : tensor<8x16xf32>
  // expected-remark @+1 {{collective: axes=["dp", "tp"] group=8 bytes=256}}
  %1 = dist.all_reduce %h on @mesh_dp_2_tp_4 ["dp", "tp"] sum : tensor<8x16xbf16>
  // expected-remark @+1 {{collective: axes=["tp"] group=4 bytes=512}}
  %2 = dist.all_gather %x on @mesh_dp_2_tp_4 ["tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
  // expected-remark @+1 {{collective: axes=["tp"] group=4 bytes=512}}
  %3 = dist.reduce_scatter %x on @mesh_dp_2_tp_4 ["tp"] dim = 0 sum : tensor<8x16xf32> -> tensor<2x16xf32>
  // expected-remark @+1 {{collective: axes=["tp"] group=4 bytes=512}}
  %4 = dist.all_to_all %x on @mesh_dp_2_tp_4 ["tp"] split_dim = 0 concat_dim = 1 : tensor<8x16xf32> -> tensor<2x64xf32>
  // expected-remark @+1 {{collective: axes=["tp"] group=4 bytes=0}}
  %5 = dist.all_slice %x on @mesh_dp_2_tp_4 ["tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x4xf32>
  // expected-remark @+1 {{collective: axes=["dp"] group=2 bytes=512}}
  %6 = dist.collective_permute %x on @mesh_dp_2_tp_4 ["dp"] pairs = [0, 1, 1, 0] : tensor<8x16xf32>
  // expected-remark @+1 {{collective: axes=["dp"] group=2 bytes=512}}
  %7 = dist.broadcast %x on @mesh_dp_2_tp_4 ["dp"] root = 0 : tensor<8x16xf32>
  return
}
