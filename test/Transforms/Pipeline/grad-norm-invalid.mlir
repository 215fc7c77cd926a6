// RUN: tessera-opt %s -split-input-file --tessera-pipeline="stages=2" --verify-diagnostics

// Tests that --tessera-pipeline refuses a gradient norm that an update
// reads without --tessera-clip-gradients' mark: it finds norms by the mark,
// and would otherwise make this one on one rank from gradients sent there.
dist.mesh @mesh ["pp"=2]
func.func @unmarked(%w: tensor<4xf32> {nn.param = "w"}, %g: tensor<4xf32>,
                    %m: tensor<4xf32> {nn.state = "w.adam_m"}, %v: tensor<4xf32> {nn.state = "w.adam_v"},
                    %step: tensor<i64> {nn.state = "step"}) -> (tensor<4xf32> {nn.updates = 0 : i64}) {
  %s = nn.sum_squares %g : tensor<4xf32>
  // expected-error @+1 {{cannot pipeline: the gradient norm that an update reads is not marked tessera.global_norm (--tessera-clip-gradients marks it)}}
  %n = nn.sqrt %s : tensor<f32>
  %p, %m2, %v2 = nn.adamw %w, %g, %m, %v, %step norm %n lr = 0.1 {max_grad_norm = 1.0 : f32} : tensor<4xf32>, tensor<4xf32>, tensor<i64> norm tensor<f32>
  return %p : tensor<4xf32>
}

// -----

// Tests that --tessera-pipeline refuses a marked gradient norm that is not
// a square root: each rank's program makes the norm again as one.
dist.mesh @mesh ["pp"=2]
func.func @not_square_root(%w: tensor<4xf32> {nn.param = "w"}, %g: tensor<4xf32>,
                           %m: tensor<4xf32> {nn.state = "w.adam_m"}, %v: tensor<4xf32> {nn.state = "w.adam_v"},
                           %step: tensor<i64> {nn.state = "step"}) -> (tensor<4xf32> {nn.updates = 0 : i64}) {
  %s = nn.sum_squares %g : tensor<4xf32>
  // expected-error @+1 {{cannot pipeline: the gradient norm is not the square root of a sum of nn.sum_squares}}
  %n = nn.abs %s {tessera.global_norm} : tensor<f32>
  %p, %m2, %v2 = nn.adamw %w, %g, %m, %v, %step norm %n lr = 0.1 {max_grad_norm = 1.0 : f32} : tensor<4xf32>, tensor<4xf32>, tensor<i64> norm tensor<f32>
  return %p : tensor<4xf32>
}

// -----

// Tests that --tessera-pipeline refuses a marked gradient norm whose sum
// has a term that is no nn.sum_squares: each rank sums only such terms.
dist.mesh @mesh ["pp"=2]
func.func @other_term(%w: tensor<4xf32> {nn.param = "w"}, %g: tensor<4xf32>,
                      %m: tensor<4xf32> {nn.state = "w.adam_m"}, %v: tensor<4xf32> {nn.state = "w.adam_v"},
                      %step: tensor<i64> {nn.state = "step"}) -> (tensor<4xf32> {nn.updates = 0 : i64}) {
  %s = nn.sum_squares %g : tensor<4xf32>
  %e = nn.exp %s : tensor<f32>
  %t = nn.add %s, %e : tensor<f32>
  // expected-error @+1 {{cannot pipeline: the gradient norm sums a value that is no nn.sum_squares}}
  %n = nn.sqrt %t {tessera.global_norm} : tensor<f32>
  %p, %m2, %v2 = nn.adamw %w, %g, %m, %v, %step norm %n lr = 0.1 {max_grad_norm = 1.0 : f32} : tensor<4xf32>, tensor<4xf32>, tensor<i64> norm tensor<f32>
  return %p : tensor<4xf32>
}
