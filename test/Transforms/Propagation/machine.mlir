// RUN: tessera-opt %s --tessera-propagate | FileCheck %s --check-prefix=BYTES
// RUN: tessera-opt %s --tessera-propagate="machine=dgx-h100" | FileCheck %s --check-prefix=MACHINE
// RUN: tessera-opt %s --tessera-propagate="machine=dgx-h100 explain=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN
// RUN: not tessera-opt %s --tessera-propagate="machine=no-such-machine" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// Tests that a machine model weighs a conflict by the time to reshard. On
// a DGX H100 mesh of 2 nodes x 8 GPUs, "intra" spans a node's NVLink and
// "inter" crosses InfiniBand. The operands are the same size, so by bytes
// it is a tie that the first operand wins; on the machine, gathering %a over
// NVLink is cheaper than gathering %b over InfiniBand, so "inter" wins.
// (At a few KB the latency of NVLink's 7 ring steps would dominate.)
dist.mesh @mesh ["inter"=2, "intra"=8]
func.func @tie(%a: tensor<4096x1024xf32> {dist.sharding = #dist.sharding<@mesh, [{"intra"}, {}]>},
               %b: tensor<4096x1024xf32> {dist.sharding = #dist.sharding<@mesh, [{"inter"}, {}]>}) -> tensor<4096x1024xf32> {
  %y = nn.add %a, %b : tensor<4096x1024xf32>
  return %y : tensor<4096x1024xf32>
}
// BYTES: nn.add {{.*}} {dist.sharding = [#dist.sharding<@mesh, [{"intra"}, {}]>]}
// MACHINE: nn.add {{.*}} {dist.sharding = [#dist.sharding<@mesh, [{"inter"}, {}]>]}
// EXPLAIN: conflict on factor {{.*}}: operand #0 wants {"intra"}, operand #1 wants {"inter"}; kept {"inter"} of operand #1 (fastest to reshard on dgx-h100)
// UNKNOWN: error: cannot load machine 'no-such-machine':
