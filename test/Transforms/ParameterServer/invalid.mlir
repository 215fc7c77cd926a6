// RUN: tessera-opt %s --tessera-parameter-server --split-input-file --verify-diagnostics

// Tests what cannot be split into workers and servers, each with one
// error.

dist.mesh @mesh ["dp"=2]
// expected-error @+1 {{parameter-server training splits a train step, but this function updates no parameter (compile it with --train)}}
func.func @loss(%x: tensor<8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}]>}) -> tensor<f32> {
  %l = nn.reduce_mean %x dims = [0] : tensor<8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

dist.mesh @mesh ["dp"=2, "tp"=2]
// expected-error @+1 {{parameter-server workers hold whole parameters, but parameter 'w' is split over "tp"}}
func.func @split(%w: tensor<4xf32> {nn.param = "w", dist.sharding = #dist.sharding<@mesh, [{"tp"}]>},
                 %g: tensor<4xf32>, %lr: tensor<i64> {nn.state = "step"}) -> (tensor<4xf32> {nn.updates = 0 : i64}) {
  %n = nn.sgd %w, %g lr = 0.1 : tensor<4xf32>
  return %n : tensor<4xf32>
}

// -----

func.func @clipped(%w: tensor<4xf32> {nn.param = "w"}, %g: tensor<4xf32>,
                   %m: tensor<4xf32> {nn.state = "w.adam_m"}, %v: tensor<4xf32> {nn.state = "w.adam_v"},
                   %step: tensor<i64> {nn.state = "step"}, %norm: tensor<f32>) -> (tensor<4xf32> {nn.updates = 0 : i64}) {
  // expected-error @+1 {{parameter-server training cannot split an update that reads operand #5 beyond its parameter, gradient, state and step}}
  %p, %m2, %v2 = nn.adamw %w, %g, %m, %v, %step norm %norm lr = 0.1 {max_grad_norm = 1.0 : f32} : tensor<4xf32>, tensor<4xf32>, tensor<i64> norm tensor<f32>
  return %p : tensor<4xf32>
}

// -----

// expected-error @+1 {{parameter-server training splits one train step, got 2 functions}}
module {
  func.func @a() { return }
  func.func @b() { return }
}
