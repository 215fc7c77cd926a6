// RUN: tessera-opt %s --split-input-file --verify-diagnostics --tessera-export="output=%t.plan"

// Tests that a program sharded over devices but not partitioned is refused:
// its global shapes would run as each device's pieces.

dist.mesh @mesh ["dp"=2]
func.func @propagated(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x4xf32> {
  // expected-error @+1 {{cannot export: the program is sharded but not partitioned; run --tessera-partition first (or --tessera-strip-sharding for one device)}}
  %y = nn.relu %x {dist.sharding = [#dist.sharding<@mesh, [{"dp"}, {}]>]} : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

dist.mesh @mesh ["dp"=2]
func.func @constrained(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{cannot export: the program is sharded but not partitioned}}
  %y = dist.sharding_constraint %x <@mesh, [{"dp"}, {}]> : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// A constraint on a one-device axis splits nothing: exported as its operand.
dist.mesh @mesh ["dp"=1]
func.func @one_device(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %y = dist.sharding_constraint %x <@mesh, [{"dp"}, {}]> : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// Tests that annotated arguments alone (nothing propagated) are refused too,
// unless --tessera-partition made the function (dist.partitioned).
dist.mesh @mesh ["dp"=2]
// expected-error @+1 {{cannot export: argument #0 is sharded but the program is not partitioned; run --tessera-partition first (or --tessera-strip-sharding for one device)}}
func.func @annotated(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x4xf32> {
  %y = nn.relu %x : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

dist.mesh @mesh ["dp"=2]
// expected-error @+1 {{cannot export: result #0 is sharded but the program is not partitioned}}
func.func @annotated_result(%x: tensor<8x4xf32>) -> (tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) {
  %y = nn.relu %x : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// A partitioned function's arguments are its pieces.
dist.mesh @mesh ["dp"=2]
func.func @partitioned(%x: tensor<4x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<4x4xf32> attributes {dist.partitioned} {
  %y = nn.relu %x : tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}
