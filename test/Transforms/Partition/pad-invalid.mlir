// RUN: tessera-opt %s --split-input-file --tessera-propagate --tessera-pad -verify-diagnostics

// Tests what --tessera-pad cannot pad: each is one error naming the op and
// the dim.

// A reshape's minor factor (the 3 of [4, 3]) split unevenly: its padding
// would fall inside the merged dim.
dist.mesh @m ["x"=2]
func.func @minor_factor(%x: tensor<12xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{cannot pad nn.reshape: a dim of 12 elements is made of several factors and the minor one of 3 is split unevenly (only a dim's major factor can grow)}}
  %r = nn.reshape %x : tensor<12xf32> -> tensor<4x3xf32>
  %c = dist.sharding_constraint %r <@m, [{}, {"x"}]> : tensor<4x3xf32>
  return %c : tensor<4x3xf32>
}

// -----

// A normalization reads its normalized dim whole.
dist.mesh @m ["x"=4]
func.func @normalized(%x: tensor<4x10xf32> {dist.sharding = #dist.sharding<@m, [{}, {"x"}]>},
                      %g: tensor<10xf32>, %b: tensor<10xf32>) -> tensor<4x10xf32> {
  // expected-error @+1 {{cannot pad nn.layer_norm: a mesh axis splits dim 1 of operand #0 unevenly, which this op reads whole (need_replication factor of 10)}}
  %y = nn.layer_norm %x, %g, %b : tensor<4x10xf32>, tensor<10xf32>, tensor<10xf32>
  return %y : tensor<4x10xf32>
}

// -----

// Random numbers over a padded dim would not be the single device's.
dist.mesh @m ["x"=4]
func.func @dropout(%x: tensor<6x16xf32> {dist.sharding = #dist.sharding<@m, [{"x"}, {}]>},
                   %step: tensor<i64>) -> tensor<6x16xf32> {
  // expected-error @+1 {{cannot pad random numbers: a mesh axis splits a dim of them unevenly}}
  %y = nn.dropout %x step %step rate = 0.1 seed = 7 : tensor<6x16xf32>, tensor<i64>
  return %y : tensor<6x16xf32>
}

// -----

// Attention with dropout draws its mask for the padded batch: the same error
// as a dropout's.
dist.mesh @m ["x"=4]
func.func @attention_dropout(%q: tensor<6x2x8x16xf32> {dist.sharding = #dist.sharding<@m, [{"x"}, {}, {}, {}]>},
                             %kv: tensor<6x2x8x16xf32>, %step: tensor<i64>) -> tensor<6x2x8x16xf32> {
  // expected-error @+1 {{cannot pad random numbers: a mesh axis splits a dim of them unevenly}}
  %o = nn.attention %q, %kv, %kv step %step scale = 0.25 dropout = 0.1 seed = 2
      : (tensor<6x2x8x16xf32>, tensor<6x2x8x16xf32>, tensor<6x2x8x16xf32>, tensor<i64>) -> tensor<6x2x8x16xf32>
  return %o : tensor<6x2x8x16xf32>
}
