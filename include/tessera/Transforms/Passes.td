//===- Passes.td - Tessera's compiler passes ---------------*- tablegen -*-===//

#ifndef TESSERA_TRANSFORMS_PASSES
#define TESSERA_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def AutodiffPass : Pass<"tessera-autodiff", "mlir::ModuleOp"> {
  let summary = "Appends the gradient of the loss for every parameter";
  let description = [{
    Reverse-mode automatic differentiation. Each function must return one
    scalar float loss; its arguments marked `nn.param` are the parameters.
    The pass walks the ops from the loss back to the parameters and asks each
    one for the gradients of its operands (`GradientOpInterface`, built from
    nn ops), summing where a value has several uses. The function then
    returns the loss followed by one gradient per parameter, in argument
    order, each result marked `nn.grad_of = "<parameter>"`.

    Only values that depend on a parameter get gradients; an op on that path
    without a derivative is an error naming it.

    Before:
    ```mlir
    func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x2xf32> {nn.param = "w"}) -> tensor<f32> {
      %y = nn.dot %x, %w contracting_dims = [1] x [0] : ...
      %l = nn.reduce_sum %y dims = [0, 1] : tensor<4x2xf32> -> tensor<f32>
      return %l : tensor<f32>
    }
    ```
    After, the function also returns `dl/dw = dot(x, ones)` contracted over
    the batch: `-> (tensor<f32>, tensor<8x2xf32> {nn.grad_of = "w"})`.
  }];
}

def TrainStepPass : Pass<"tessera-train-step", "mlir::ModuleOp"> {
  let summary = "Turns a loss function into one optimizer step";
  let description = [{
    Differentiates the loss (as `--tessera-autodiff`) and updates every
    `nn.param` argument with its gradient, so that the function becomes one
    training step: parameters, optimizer state and a batch in; new
    parameters, new state and the loss out.

    - `optimizer=sgd`: `nn.sgd` per parameter; results are the new
      parameters, then the loss.
    - `optimizer=adamw` (default): new arguments after the original ones,
      the first and second moments of each parameter
      (`nn.state = "<param>.adam_m"`, `"<param>.adam_v"`, of its type) and
      the step counter (`nn.state = "step"`, `tensor<i64>`, set by the
      runtime from 1); `nn.adamw` per parameter; results are the new
      parameters, the new first moments, the new second moments, then the
      loss.

    Each new parameter or state result carries `nn.updates = <index>`: the
    argument it replaces in the next step.

    `precision=mixed` keeps f32 master weights for a bf16 or f16 model: each
    16-bit parameter argument becomes f32 and is cast down where the model
    reads it, so the forward and backward compute in 16 bits while the
    gradient arrives in f32 (through the cast's derivative) and the optimizer
    updates f32 weights and f32 moments: per parameter 2 bytes of weights
    and 2 of gradients in compute, 12 of master weights and Adam state, as
    in the ZeRO paper. Sharded training needs nothing
    more: gradients follow the shardings of their parameters through the
    optimizer ops, and the data-parallel gradient reduction falls out of the
    weight gradients' contraction over the split batch.
  }];
  let options = [
    Option<"optimizer", "optimizer", "::tessera::Optimizer",
           /*default=*/"::tessera::Optimizer::AdamW", "The optimizer",
           [{::tessera::enumValues(::tessera::kOptimizerNames)}]>,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "Learning rate">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"epsilon", "epsilon", "double", /*default=*/"1e-8",
           "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0",
           "Decoupled weight decay (AdamW) or L2 decay (SGD)">,
    Option<"precision", "precision", "::tessera::TrainPrecision",
           /*default=*/"::tessera::TrainPrecision::Model",
           "The types the step computes in",
           [{::tessera::enumValues(::tessera::kTrainPrecisionNames)}]>,
    Option<"schedule", "lr-schedule", "::tessera::LrScheduleKind",
           /*default=*/"::tessera::LrScheduleKind::Constant",
           "How the learning rate follows the step counter (AdamW)",
           [{::tessera::enumValues(::tessera::kLrScheduleNames)}]>,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "Steps of linear warmup from 0 to lr">,
    Option<"decaySteps", "decay-steps", "int64_t", /*default=*/"0",
           "The step by which a linear or cosine schedule reaches min-lr">,
    Option<"minLr", "min-lr", "double", /*default=*/"0.0",
           "The learning rate a schedule decays to">,
    Option<"lossScale", "loss-scale", "bool", /*default=*/"false",
           "Dynamic loss scaling: differentiate the loss times a scale that "
           "--tessera-clip-gradients updates">,
    Option<"initialLossScale", "initial-loss-scale", "double",
           /*default=*/"0", "The first loss scale (0: 2^16, or 2^15 for an "
           "f16 loss)">,
  ];
}

def ParameterServerPass : Pass<"tessera-parameter-server", "mlir::ModuleOp"> {
  let summary = "Splits a train step into a parameter server's worker or server program";
  let description = [{
    Runs on a data-parallel train step (after `--tessera-train-step`, before
    propagation) and keeps one side of parameter-server training (Downpour
    SGD): the compile driver runs it on two copies of the step, one per
    `part`, and joins the two plans (`tessera compile --ps S`).

    - `part=worker`: the workers' forward and backward. The optimizer
      updates, their state and the step counter go (the step counter stays
      where the forward draws random numbers by it); the function returns
      the loss, then each updated parameter's gradient, marked
      `nn.grad_of = "<param>"`. Each is pinned by a
      `dist.sharding_constraint` as still `unreduced` over the data axes (the
      mesh's axes of more than one device), so the partitioner inserts no
      collective: a worker's gradient is its partial sum, which the servers
      add, and its loss is its own batch's. Every parameter must be whole
      (no axis of more than one device splits it). Arguments keep their
      index in the step (`dist.source_index`), so a run generates the same
      inputs as the step's.
    - `part=server`: the servers' updates. Each update reads its gradient
      from a new argument marked `nn.grad_of`; the forward, the backward,
      the data and the loss go; the results are the new parameters and
      state. The function moves to a mesh `@ps ["ps"=servers]`: each
      parameter, gradient and state splits its first dim that the servers
      divide (dim 0, padded, if none does) over "ps", so that server s holds
      its piece of every parameter, as a key range of a parameter server.
      Updates are elementwise: the partitioned program has no collective.

    Gradient clipping and loss scaling read every gradient at once, which no
    server holds: such a step is refused.
  }];
  let options = [
    Option<"part", "part", "::tessera::ServerPart",
           /*default=*/"::tessera::ServerPart::Worker",
           "The program to keep",
           [{::tessera::enumValues(::tessera::kServerPartNames)}]>,
    Option<"servers", "servers", "int64_t", /*default=*/"1",
           "The number of servers (the size of the mesh axis \"ps\")">,
  ];
  let dependentDialects = ["::tessera::dist::DistDialect"];
}

def WeightStashPass : Pass<"tessera-weight-stash", "mlir::ModuleOp"> {
  let summary = "Computes each step's gradients at the weights of the step before (PipeDream-2BW)";
  let description = [{
    Runs on a train step (after `--tessera-train-step`, before ZeRO and
    propagation) and gives it the weight update semantics of
    PipeDream-2BW (Narayanan et al. 2021): W(t+1) = W(t) - lr * grad
    f(W(t-1)). Each step's forward and backward read the previous version
    of every parameter, so that a pipeline without a flush between steps
    (whose first microbatches of a step start before the last ones of the
    step before are done) computes what this program computes, keeping two
    versions of each weight.

    For each parameter P that an optimizer update writes, a state argument
    S (`nn.state = "<param>.stash"`, `nn.version_of = "<param>"`, sharded as
    P is) takes the place of P in every op but the update; the step returns
    P as S's new value. The runtime starts S equal to P (the plan's
    `WEIGHT_STASH` role), so the first two steps both compute their
    gradients at the initial weights.

    ```mlir
    // Before:
    func.func @step(%w: tensor<8x8xf32> {nn.param = "w"}, %x: ...) -> ... {
      %y = nn.dot %x, %w ...
      ...
      %w1 = nn.sgd %w, %gw ...
      return %w1, %loss : ...
    }
    // After:
    func.func @step(%w: tensor<8x8xf32> {nn.param = "w"}, %x: ...,
                    %s: tensor<8x8xf32> {nn.state = "w.stash",
                                         nn.version_of = "w"}) -> ... {
      %y = nn.dot %x, %s ...
      ...
      %w1 = nn.sgd %w, %gw ...
      return %w1, %loss, %w : ...
    }
    ```

    With `delays` (`name:d` per parameter, as `tessera verify` reads them
    from a PipeDream plan) each step reads parameter `name` as it was d
    steps before, W(t+1) = W(t) - lr * grad f(W(t-d)): what PipeDream's
    pipeline computes, whose rank r runs a step at its weights of p - r - 1
    updates before (a stage's latest; the last stage's are current). A
    parameter with d = 0 is read as is; d > 0 keeps a chain of d states, S1
    (`"<param>.stash.1"`) to Sd (`"<param>.stash"`, the one read), each
    the one before's previous value: S1's next is P, Sk's next is
    S(k-1). A parameter the option does not name keeps its weights as is.
  }];
  let options = [
    ListOption<"delays", "delays", "std::string",
               "Per parameter, name:d: read it as it was d steps before "
               "(PipeDream; without the option every parameter is read as "
               "of the step before)">
  ];
}

def ClipGradientsPass : Pass<"tessera-clip-gradients", "mlir::ModuleOp"> {
  let summary = "Clips a train step's gradients by their global norm";
  let description = [{
    Runs on a train step after `--tessera-zero` (or where it would run) and
    before microbatching and propagation. The global norm is that of every
    gradient the step's `nn.adamw` updates read, as they read them (after
    ZeRO, a unit's flat gradient; the sum of a microbatched step's
    gradients): `sqrt(sum_i nn.sum_squares(g_i))`. Every update then reads
    it as its `grad_norm` with `max_grad_norm = max-norm`, and scales its
    gradient by `min(1, max-norm / (norm + 1e-6))`, as PyTorch's
    `clip_grad_norm_`. The norm is also returned after the loss, marked
    `nn.metric = "grad_norm"`. Its `nn.sqrt` carries the unit attribute
    `tessera.global_norm`, by which `--tessera-pipeline` finds it; the
    export leaves the mark out of the plan.

    With dynamic loss scaling (`--tessera-train-step=loss-scale=1`: the
    updates read a `loss_scale` S), the gradients are S times the true ones:
    the norm is too, and a norm that is not finite (an overflow) makes every
    update skip the step. The scale's state is updated as PyTorch's
    GradScaler updates it: halved after an overflow, doubled after
    `loss-scale-window` steps without one. The true norm and the scale are
    returned as the metrics "grad_norm" and "loss_scale".

    The updates move after the norm, which reads every gradient; each
    gradient the updates read is first made complete
    (`dist.sharding_constraint` with no pending sums, unless ZeRO pinned
    it), so that the norm and the update read one reduced gradient.
    Partitioned, each `nn.sum_squares` is summed over exactly the axes that
    split its gradient, once: a partial sum over an axis is reduced where
    the sum of the squares meets a term without it.
  }];
  let options = [
    Option<"maxNorm", "max-norm", "double", /*default=*/"1.0",
           "The largest global gradient norm the updates read (0: no "
           "clipping, only the norm that loss scaling reads)">,
    Option<"window", "loss-scale-window", "int64_t", /*default=*/"2000",
           "Steps without an overflow after which the loss scale doubles">,
  ];
}

def RecomputePass : Pass<"tessera-recompute", "mlir::ModuleOp"> {
  let summary = "Activation recomputation: the backward recomputes what the forward would keep";
  let description = [{
    Runs on a train step (after `--tessera-train-step`, before ZeRO and
    propagation). The forward pass is what the loss depends on; the backward
    reads some of its values. For each group of forward ops below, the
    values the backward reads that no forward op outside the group reads are
    not kept: the ops that make them are cloned right before their first
    backward reader, which reads the clones, so the originals die in the
    forward (the memory plan frees them at their last use) and the clones
    live only through that part of the backward. What a group hands to the
    rest of the forward (its checkpoints) is kept as before.

    - `mode=selective` (Korthikanti et al. 2022): the attention core, from
      the product of queries and keys through its scaling, mask and
      `nn.softmax` to the product with the values: the s x s scores and
      probabilities are recomputed from the queries and keys.
    - `mode=full`: each layer, found by the forward's structure (the names
      of its parameters play no part): its repeated blocks, the runs of ops
      between the places where one value crosses (the residual stream) that
      repeat back to back; where nothing repeats, each such run. A pipeline
      cut (`dist.stage`) inside a layer makes two. Everything inside is
      recomputed from the layer's input in its backward.

    With either mode a group also takes what parameters and constants alone
    make (broadcast biases, masks) that only its ops read.
    - `mode=none` changes nothing.

    The program computes the same values; it runs more FLOPs (about a
    third of the forward for `full`) and holds fewer activations.

    Before (`mode=selective`), the backward reads `%p`:
    ```mlir
    %s = nn.dot %q, %k ...
    %p = nn.softmax %s dim = 3 ...
    %o = nn.dot %p, %v ...
    ...
    %dv = nn.dot %p, %do ...
    ```
    After: `%dv = nn.dot %p2, %do` with `%s2 = nn.dot %q, %k`,
    `%p2 = nn.softmax %s2` cloned just before it.
  }];
  let options = [
    Option<"mode", "mode", "::tessera::Recompute",
           /*default=*/"::tessera::Recompute::Selective",
           "What the backward recomputes",
           [{::tessera::enumValues(::tessera::kRecomputeNames)}]>,
  ];
}

def PropagatePass : Pass<"tessera-propagate", "mlir::ModuleOp"> {
  let summary = "Completes partial sharding annotations to every value";
  let description = [{
    GSPMD/Shardy-style sharding propagation. Seeds are the `dist.sharding`
    attributes of function arguments and results and the
    `dist.sharding_constraint` ops. Shardings move through every op along the
    factors of its `ShardingRuleOpInterface` rule, forward and backward, to a
    fixed point:

    - a tensor dim gains axes only when it is open (`{?}`, `{"x", ?}`) or not
      annotated at all, and only by extending its axes; closed dims never
      change, and user annotations beat inferred shardings;
    - a factor that the op cannot split (`need_replication`) takes no axes;
    - a dim's major factor may take axes that do not divide it, when every
      device still gets some of it (`--tessera-pad` then pads it, as GSPMD
      and Shardy do): 25 heads over 2 devices split, 13 each;
    - when the tensors of one factor disagree (a conflict), `mode=aggressive`
      (the default) keeps the candidate that leaves the fewest bytes to
      reshard (with `machine=`, the fewest seconds: each losing tensor is
      all-gathered over the axes it loses, priced on the links those axes
      cross), `mode=conservative` keeps only their common prefix; ties break
      towards more axes, then towards the first operand;
    - dim priorities (`{"x"}p1`) run in rounds, lowest number first; dims
      without a priority take part from the first round;
    - the outcome does not depend on the order of the ops: propagation runs
      in waves, each op of a wave reading the shardings as the wave found
      them, so a value takes what the annotations nearest to it give; where
      ops propose different axes for one dim, the proposal most of them
      agree with wins, then the one with more axes, then the one first in
      the mesh's axis order, and a value's dims settle from the first.
      Shardings flow forward alone (operands to results) first, then both
      ways, so a batch split reaches the backward pass through the forward
      activations;
    - a result that updates an argument (`nn.updates`) takes that argument's
      sharding, so a train step returns its new state in the layout it reads
      (the partitioner gathers or slices it back); a result annotated
      otherwise is an error.

    An op without a sharding rule gets a warning and replicated results.

    The result has a closed `dist.sharding` on every function argument and
    result and an array of them (one per result) on every op with tensor
    results. A value read only by `dist.sharding_constraint`s that leave
    axes `unreduced`, directly or through linear ops (`isLinear`), carries
    those axes as `unreduced`: the partitioner keeps its partial sums
    pending until the constraint (ZeRO-1's gradients).

    With `explain=true`, a remark says for every value where its sharding
    came from, and for every conflict which candidates competed.

    Before:
    ```mlir
    func.func @f(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {} ]>},
                 %w: tensor<16x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"} ]>})
        -> tensor<8x64xf32> {
      %y = nn.dot %x, %w contracting_dims = [1] x [0] : ...
      %r = nn.relu %y : tensor<8x64xf32>
      return %r : tensor<8x64xf32>
    }
    ```
    After: `%y` and `%r` carry
    `{dist.sharding = [#dist.sharding<@mesh, [{"dp"}, {"tp"} ]>]}` and so does
    the function result.
  }];
  let options = [
    Option<"mode", "mode", "::tessera::PropagationMode",
           /*default=*/"::tessera::PropagationMode::Aggressive",
           "How to resolve conflicts",
           [{::tessera::enumValues(::tessera::kPropagationModeNames)}]>,
    Option<"explain", "explain", "bool", /*default=*/"false",
           "Report where each value's sharding came from and every conflict">,
    Option<"machine", "machine", "std::string", /*default=*/"\"\"",
           "A machine file or preset name: aggressive conflicts then keep "
           "the candidate fastest to reshard on its links">,
  ];
  let dependentDialects = ["::tessera::dist::DistDialect"];
}

def DecomposeSplitReductionsPass
    : Pass<"tessera-decompose-split-reductions", "mlir::ModuleOp"> {
  let summary = "Softmax and cross-entropy over a split dim, as Megatron-LM's vocab-parallel cross-entropy";
  let description = [{
    Runs on propagated functions, before `--tessera-pad` and
    `--tessera-partition`. `nn.softmax` (not causal), `nn.log_softmax` and
    `nn.cross_entropy` reduce over a dim (the classes) that their sharding
    rules keep whole on every device. Where propagation left that dim of
    the input split, as a tied LM head leaves its logits split on the
    vocabulary with the embedding table, the op would gather the whole
    input first.

    This pass rewrites each such op into the ops it is made of, which
    partition on pieces of the dim: `s = x - max(x)`, `e = exp(s)`, then
    `e / sum(e)` (softmax), `s - log(sum(e))` (log-softmax) or
    `log(sum(e)) - sum(s * one_hot(labels))` (cross-entropy). Each new
    value gets the input's dims' sharding, or that without the reduced
    dim; the result keeps the op's. Partitioned, the max and the sums are
    partial results over the dim's axes, completed by an all-reduce (max,
    then sum) of a row-sized tensor, and the one-hot covers the device's
    classes (`nn.one_hot`'s piece index): the logits are never gathered,
    forward or backward. Ops whose dim is not split, or split over axes of
    one device, are left as they are. An input narrower than f32 is cast
    to f32 first and the result cast back, so that the pieces' sums
    travel in f32 (Megatron-LM's cross-entropy computes in f32 too).

    ```mlir
    // logits [4, 8, 1024] split over "tp" on the vocabulary:
    %l = nn.cross_entropy %logits, %labels : tensor<4x8x1024xf32>, tensor<4x8xi32>
    // becomes nn.reduce_max, nn.sub, nn.exp, nn.reduce_sum, nn.one_hot,
    // nn.mul, nn.reduce_sum, nn.log and nn.sub, each with a dist.sharding.
    ```
  }];
  let dependentDialects = ["::tessera::nn::NNDialect"];
}

def PadPass : Pass<"tessera-pad", "mlir::ModuleOp"> {
  let summary = "Pads dims that their mesh axes do not divide, as GSPMD and Shardy do";
  let description = [{
    Runs on propagated functions, before `--tessera-partition`. A dim that
    the group of its mesh axes does not divide (vocab 50257 over 8
    devices, 25 heads over 2, a batch of 6 over 4) grows to the next
    multiple of every group that splits it, or anything an op ties it to
    (the same factor of an op's rule), anywhere in the function; the
    padding is the end of the dim. A dim that an op sees as several factors
    (a reshape's `[s, h*d]`) grows with its major factor; a minor factor
    that would have to grow is an error. The program is then the same
    program on larger tensors, and every split divides.

    The padding holds whatever the ops compute there, and is set to a
    neutral value (an `nn.select` against an `nn.iota` of the dim) wherever
    an op would mix it into real elements:

    - zeros before a sum over it: a dot's contracting dims, nn.reduce_sum
      and nn.reduce_mean (whose result is then scaled from the padded count
      to the real one), nn.scatter_add and nn.embedding_grad;
    - -infinity before nn.reduce_max, nn.softmax, nn.log_softmax,
      nn.cross_entropy's classes and nn.top_k;
    - zeros in an optimizer's gradient, so that the padding of a parameter
      and of its state stays zero.

    Padding known to hold zeros (arguments, which the runtime pads with
    zeros, and what ops that keep zeros compute from them) is not masked
    again. Ops that pick by real indices (nn.embedding, nn.gather,
    nn.one_hot, a causal mask) need no mask. Ops that cannot compute on
    padding of a dim they read whole (a normalization's normalized dim,
    attention's sequence and head dims, a slice of part of a padded dim, a
    concatenation along one, random numbers over one, an op without a
    sharding rule) report an error naming the dim.

    Arguments and results record their shape before padding
    (`dist.unpadded_shape`); the plan carries it, and the runtime pads each
    rank's piece of an argument with zeros and cuts the padding off a
    result, so what goes in and comes out is the program as written.
  }];
  let dependentDialects = ["::tessera::nn::NNDialect",
                           "::tessera::dist::DistDialect"];
}

def PartitionPass : Pass<"tessera-partition", "mlir::ModuleOp"> {
  let summary = "Rewrites sharded functions into per-device SPMD programs";
  let description = [{
    Takes fully propagated functions (every value has a `dist.sharding`, see
    `--tessera-propagate`) and rewrites each into the program one device
    runs: every tensor gets its local shape, and `dist` collectives appear
    wherever a producer's sharding differs from what the consumer's rule
    needs:

    - a split contracting (reduction) factor leaves partial sums: an
      all_reduce, or a reduce_scatter when the result is wanted split (the
      Megatron row-parallel into sequence-parallel pattern);
    - split to replicated is an all_gather of only the axes that leave a dim;
      replicated to split is an all_slice (no communication); an axis moving
      between dims is an all_to_all;
    - every split must divide its dim: `--tessera-pad` pads those that do
      not, before.

    Where an op's rule allows several layouts of its factors, the
    partitioner prices each by the reshards it needs (its operands from
    where they are, its results to what their users want) and takes the
    cheapest, as GSPMD's dot handler does: the default (split contracting
    dims where the operands have them, the rest as the results want), the
    results' parallel factors first, and each operand or result kept as it
    is (a weight-stationary matmul gathers its activation instead of moving
    its weight). Only layouts that split the op's work at least as finely as
    the default compete; the price is the bytes each device sends (ring
    algorithms) or, with `machine=`, the seconds on its links. With
    `explain=true` a remark names every layout priced.

    Function arguments and results keep their `dist.sharding` (now describing
    how the local piece sits in the global tensor). With `explain=true`, a
    remark names the reason for every reshard.

    Before (`%w` split by columns over "tp", `%x` replicated):
    ```mlir
    %y = nn.dot %x, %w contracting_dims = [1] x [0] {dist.sharding = [#dist.sharding<@mesh, [{}, {"tp"} ]>]}
        : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
    ```
    After, on a mesh with "tp"=4:
    ```mlir
    %y = nn.dot %x, %w contracting_dims = [1] x [0]
        : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    ```
  }];
  let options = [
    Option<"explain", "explain", "bool", /*default=*/"false",
           "Report the reason for every reshard and the layouts priced">,
    Option<"machine", "machine", "std::string", /*default=*/"\"\"",
           "A machine file or preset name: layouts are then priced in "
           "seconds on its links">,
  ];
  let dependentDialects = ["::tessera::dist::DistDialect"];
}

def ZeroPass : Pass<"tessera-zero", "mlir::ModuleOp"> {
  let summary = "ZeRO-1/2/3: shards optimizer state, gradients and parameters over the data-parallel axes";
  let description = [{
    Runs on a train step (after `--tessera-train-step` with AdamW), before
    propagation. For each `nn.adamw`, the parameter's piece (what its own
    annotation gives a device) is split over `axes` (default "dp", and
    "cp" and "ep" where the mesh has them), less
    those that split the parameter already (with `axes=dp,ep` an expert's
    weights, split over "ep", shard over "dp", where their gradients sum; a
    parameter split by every axis keeps its layout): on its
    leading dim, closed and minor to the parameter's own axes there, when
    the data-parallel group divides that dim's pieces, so a device's share
    is one contiguous block; otherwise stored flat (`flat=` in the
    sharding, FSDP's FlatParameter): the piece's elements in a row, padded
    with zeros to a multiple of the group and split evenly. Either way every
    parameter but a scalar is split at any group size. A flat value is read
    by gathering its share and cutting the padding off (a view), and a
    gradient stored flat is padded (a copy) and reduce-scattered:

    - stage 1: the moments `m` and `v` take the split, and the gradient is
      pinned just before the update, first as a partial sum over the axes
      (`unreduced`, which keeps it whole and unreduced until there:
      gradients are summed whole over microbatches) and then to the split.
      The parameter is marked `replicated` over the axes. Partitioned: the
      gradient's partial sums are reduce-scattered once, right before the
      update, each rank updates its shard of the parameter, and the new
      parameter is all-gathered back to the layout it is read in (a result
      that updates an argument keeps the argument's sharding).
    - stage 2: as stage 1, but the gradient is pinned right where it is
      complete, so it is reduce-scattered then (per microbatch, the shards
      accumulating) and no whole gradient lives to the end of the backward
      pass.
    - stage 3: as stage 2, and the parameter itself takes the split: it is
      stored, updated and returned as a shard. Its reads are pinned to the
      whole layout, which makes them all-gathers: one before the forward
      pass's first read and, with `reshard-after-forward=true` (the
      default, FSDP's FULL_SHARD), another before the backward pass's first
      read, so the forward's copy dies after its last forward read; with
      `false` (SHARD_GRAD_OP) one gather serves both; with a group size
      `N` that the trailing ZeRO axes make up (FSDP2's
      `reshard_after_forward=N`), the forward's copy is cut to a split over
      those axes after its last forward read, and the backward gathers
      within them alone (a smaller, faster group). The forward pass is
      what the function's non-updating results (the loss) depend on. A
      parameter read through `nn.cast` (mixed precision) is gathered after
      the cast.

    With mixed precision (`--tessera-train-step=precision=mixed`) the f32
    master weight counts as optimizer state, as in the ZeRO paper (K = 12):
    from stage 1 it is split with the moments and the model's reads of its
    16-bit cast are pinned whole, so one gather of the 16-bit copy serves
    the forward and the backward (stage 3 frees it after the forward as
    `reshard-after-forward` says).

    Units (`units`, on by default; FSDP's FlatParameter): first, the
    parameters of each unit (the name up to its first numbered component,
    "blocks.3" for "blocks.3.attn.wq", else without its last) updated alike
    (one optimizer op and attributes, element types, replicated axes, read
    directly or through one 16-bit cast) and split alike (by no mesh axis of
    more than one device, or on one dim each by the same axes, TP's), two or
    more, become one argument, their elements one after another in argument
    order: 1-d, or split, `[rows, n]` with a row per device of those axes
    (split on dim 0 by them), row r holding each member's r-th piece; so
    does each of their optimizer states. The unit's argument and its new value list their
    members (`dist.members`, each `{name, shape, source}`, the source being the
    member's index in the step as written, which `dist.source_index` then
    gives every other argument and result). The model reads each member as
    a view of it (`nn.slice`, `nn.reshape`, and for a split member an
    `nn.transpose` that moves the rows to its split dim; with mixed
    precision, of its 16-bit cast), one per phase the member is read in, so
    stage 3 gathers the whole unit once per phase; one update of the unit
    reads the members' gradients laid out alike and concatenated
    (`nn.concat`, after the last of them is made). The unit is then stored
    flat, as above, even where the group divides it. Partitioned, a row is
    a device's: the export makes each view (the transposes move only dims
    of one element) a view of the gathered buffer and each member's
    gradient in place in the concatenation, so a unit's gather and its
    gradient copy nothing.

    Stage 0 changes nothing. A scalar parameter keeps replicated state,
    gradient and value.
  }];
  let options = [
    Option<"stage", "stage", "::tessera::ZeroStage",
           /*default=*/"::tessera::ZeroStage::OptimizerState", "ZeRO stage",
           [{::tessera::enumValues(::tessera::kZeroStageNames)}]>,
    ListOption<"dataAxes", "axes", "std::string",
               "The data-parallel mesh axes">,
    Option<"reshardAfterForward", "reshard-after-forward",
           "::tessera::ReshardAfterForward",
           /*default=*/"::tessera::ReshardAfterForward::shard()",
           "Stage 3: gather the parameter again for the backward pass "
           "(true), keep the forward's gather (false), or keep a piece per "
           "group of this size (the trailing ZeRO axes) and gather in it">,
    Option<"units", "units", "bool", /*default=*/"true",
           "Store each unit's parameters split alike, and each of their "
           "optimizer states, in one flat buffer (FSDP's FlatParameter); "
           "false: each parameter its own (FSDP2)">,
  ];
  let dependentDialects = ["::tessera::dist::DistDialect"];
}

def SchedulePass : Pass<"tessera-schedule", "mlir::ModuleOp"> {
  let summary = "Overlaps communication with compute: async collectives, prefetch, buckets";
  let description = [{
    Runs on a partitioned program (after `--tessera-partition`), before
    `--tessera-export`.

    0. Units (`gather-units`, on by default): runs of all_gathers of
       parameters (arguments with `nn.param`, or their `nn.cast`) of one
       unit over one group become one all_gather of their concatenation at
       the run's first member, each parameter sliced back out and laid out
       along its gather dim. A unit is the parameter name up to its first
       numbered component ("blocks.3.attn.wq" is in "blocks.3"), else
       without its last component: FSDP's wrapping of transformer blocks,
       so ZeRO-3 gathers a block's parameters at once, once per pass.
    1. Bucketing (`bucket-bytes` > 0): all_reduces, and reduce_scatters
       along dim 0, smaller than `bucket-bytes` and alike (kind, reduction,
       mesh group, element type) are gathered in program order into buckets
       of about `bucket-bytes`. A bucket becomes one collective over the
       concatenation of its members (each viewed as [group, rest] or
       [1, rest], concatenated along dim 1), placed at its last member, and
       each member's result is sliced back out. A bucket closes early where
       an op reads one of its members.
    2. Overlap (`prefetch` > 0): each collective over more than one device
       is started on the communication stream (`dist.stream = 1`; compute is
       stream 0) as soon as its operand is ready, and completed by a
       `dist.wait` just before its first read. At most `prefetch`
       collectives are in flight: a start waits for the wait of the
       `prefetch`-th collective before it, and a wait comes no later than
       the place of the `prefetch`-th collective after it. With
       `memory-limit` > 0, a start is not moved ahead of its place while
       the results in flight would pass that many bytes. A collective with
       nothing to overlap stays blocking.

    ZeRO-3's parameter all_gathers thus run a unit at a time during the
    previous unit's compute (prefetch), and each gradient's reduce_scatter
    during the next layer's backward.

    Before (partitioned), with `prefetch=1`:
    ```mlir
    %y = nn.dot %x, %w0 ...
    %g = dist.all_gather %w1 on @mesh ["dp"] dim = 0 ...
    %z = nn.dot %y, %g ...
    ```
    After:
    ```mlir
    %g = dist.all_gather %w1 on @mesh ["dp"] dim = 0 {dist.stream = 1 : i64} ...
    %y = nn.dot %x, %w0 ...
    %g1 = dist.wait %g : tensor<64x64xf32>
    %z = nn.dot %y, %g1 ...
    ```
  }];
  let options = [
    Option<"gatherUnits", "gather-units", "bool", /*default=*/"true",
           "Gather each unit's parameters in one all_gather">,
    Option<"prefetch", "prefetch", "int64_t", /*default=*/"1",
           "Collectives in flight at once (0: all blocking)">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"0",
           "Bucket reductions smaller than this into ones of about this "
           "size (0: no bucketing)">,
    Option<"memoryLimit", "memory-limit", "int64_t", /*default=*/"0",
           "Bytes of collective results in flight that prefetching may "
           "not pass (0: no limit)">,
  ];
  let dependentDialects = ["::tessera::dist::DistDialect",
                           "::tessera::nn::NNDialect"];
}

def AutoShardPass : Pass<"tessera-auto-shard", "mlir::ModuleOp"> {
  let summary = "Chooses every op's sharding by integer programming";
  let description = [{
    Alpa's intra-operator search (Zheng et al., OSDI 2022) on the ops'
    sharding rules. For each op, the choices are the ways the mesh axes may
    split its factors (`ShardingRuleOpInterface`: an axis splits at most one
    factor, one the op partitions and that it divides), each reduction's
    partial sums completed whole or scattered onto a result dim; for each
    function argument, the ways the axes may split its dims. Each choice
    costs its compute on the machine divided by its split (three times the
    forward when training: the backward computes twice as much), and each
    edge the reshards the partitioner inserts between the producer's result
    and the consumer's need (`planReshard`), plus, when training, those of
    the gradient back (partial over the consumer's split factors that the
    operand lacks; a value read several times sums its gradients first).
    The model state (weights, gradients, `optimizer-bytes` per parameter
    byte, split over `zero-axes` as `zero` stores them) and the forward's
    values must fit `memory-limit` per device. Annotations
    (arguments, results, `dist.sharding_constraint`) are hard constraints.
    The repeated blocks of the model (its layers) share their variables, so
    the program is the size of one block. COIN-OR CBC solves it.

    The choice is written as annotations: each argument's `dist.sharding`,
    a `dist.sharding_constraint` on each op's result and before each
    consumer that needs another sharding. Propagation and partition then
    build the program as priced. With `axes` naming only some of the mesh's
    axes, the others are left to propagation: dims stay open, and the
    solved axes a value does not use are marked `replicated`.

    With `explain=true`, a remark at each op gives its chosen sharding, its
    cost and how much more its cheapest other choice would cost, and one at
    the function the program's size, objective and solve time.

    Before, on `dist.mesh @mesh ["tp"=2]`:
    ```mlir
    func.func @mlp(%x: tensor<8x1024xf32>,
                   %w1: tensor<1024x4096xf32> {nn.param = "w1"},
                   %w2: tensor<4096x1024xf32> {nn.param = "w2"}) -> tensor<8x1024xf32> {
      %h = nn.dot %x, %w1 contracting_dims = [1] x [0] : ...
      %y = nn.dot %h, %w2 contracting_dims = [1] x [0] : ...
      return %y : tensor<8x1024xf32>
    }
    ```
    After: `%w1` is split `[{}, {"tp"} ]`, `%w2` `[{"tp"}, {} ]`, `%h` is
    constrained to `[{}, {"tp"} ]` and `%y` to `[{}, {} ]` (one all-reduce).
  }];
  let options = [
    ListOption<"axes", "axes", "std::string",
               "The mesh axes to assign (default: all of them)">,
    Option<"machine", "machine", "std::string", /*default=*/"\"dgx-h100\"",
           "A machine file or preset name to price compute and reshards on">,
    Option<"memoryLimit", "memory-limit", "double", /*default=*/"0",
           "Bytes per device for the model state and activations (0: the "
           "machine's device memory)">,
    Option<"optimizerBytes", "optimizer-bytes", "double", /*default=*/"2",
           "Bytes of optimizer state per parameter byte when training "
           "(AdamW's two moments: 2; with f32 master weights for 16-bit "
           "parameters: 6)">,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "The ZeRO stage the train step gets (--tessera-zero): its state "
           "stored split over `zero-axes`, which then split no parameter">,
    ListOption<"zeroAxes", "zero-axes", "std::string",
               "ZeRO's data-parallel axes (default: dp)">,
    ListOption<"batchAxes", "batch-axes", "std::string",
               "Solved axes that split only the batch (the data arguments' "
               "first dim and what the ops make of it), which no other axis "
               "splits: data parallelism, as microbatches and ZeRO need">,
    Option<"inference", "inference", "bool", /*default=*/"false",
           "Price the forward alone, without gradients or optimizer state">,
    Option<"shareBlocks", "share-blocks", "bool", /*default=*/"true",
           "Solve repeated blocks once, their variables shared">,
    Option<"explain", "explain", "bool", /*default=*/"false",
           "Report each op's choice, its cost and its runner-up's">,
  ];
  let dependentDialects = ["::tessera::dist::DistDialect"];
}

def SetMeshPass : Pass<"tessera-set-mesh", "mlir::ModuleOp"> {
  let summary = "Sizes the module's mesh, and adds the pipeline axis";
  let description = [{
    Sets the axis sizes of the module's one `dist.mesh` from `shape`
    (`dp=2,tp=4`, which must name exactly the mesh's axes), so that one
    annotated model compiles for any mesh of its axes. With
    `pipeline-stages=N` (N > 1) the mesh gains the pipeline axis "pp" of size
    N as its most major axis (a model without a mesh gets
    `dist.mesh @mesh ["pp"=N]`; an axis "pp" already there keeps its place);
    `shape` then need not give "pp".

    Before, with `shape=dp=4,tp=2`:
    ```mlir
    dist.mesh @mesh ["dp"=1, "tp"=1]
    ```
    After:
    ```mlir
    dist.mesh @mesh ["dp"=4, "tp"=2]
    ```
  }];
  let options = [
    Option<"shape", "shape", "std::string", /*default=*/"\"\"",
           "Axis sizes: dp=2,tp=4 (empty: keep the sizes)">,
    Option<"pipelineStages", "pipeline-stages", "int64_t", /*default=*/"1",
           "Pipeline stages: the size of the added mesh axis \"pp\"">,
  ];
  let dependentDialects = ["::tessera::dist::DistDialect"];
}

def ZigzagContextPass : Pass<"tessera-zigzag-context", "mlir::ModuleOp"> {
  let summary =
      "Stores the sequence in zigzag order: ring attention's load balance";
  let description = [{
    Runs on the sized mesh, before the train step. Ring attention over a
    sequence split in order over "cp" of n devices gives device r the keys
    of every device before it: the last device computes 2n - 1 times what
    the first does, and each ring step waits for it. In a function whose
    data (arguments that are not parameters) split their sequence (dim 1)
    over "cp" of n > 1 and whose causal `nn.attention`s have `ring`, the
    sequence is stored in zigzag order of 2n chunks (nn.attention's
    `zigzag = n`): device r then holds chunks r and 2n - 1 - r, and every
    ring step costs every device half a block (Megatron-LM's load balance,
    which it gets by permuting the batch in its data loader).

    The function computes what it did. The data are permuted on entry
    (slices and a concat, pinned to the data's sharding: the partitioner
    gathers their integers to permute them). The order follows the data
    through the ops' sharding rules; a tensor that it has not reached but
    that meets it along the sequence (positions from `nn.iota`, a position
    table) is permuted there, before a broadcast or an elementwise op that
    only feeds it. The causal attentions compare positions, and results
    that keep the sequence are permuted back.

    Where an op depends on the order beyond the attention (a slice or a
    concat along the sequence, a causal mask, dropout, routing that fills
    experts' capacity in token order), the function is left as it is and
    the pass warns: its ring stays unbalanced. A mesh without "cp", or with
    one device on it, leaves the module as it is.

    Before, on `dist.mesh @mesh ["cp"=2]`:
    ```mlir
    %x = nn.embedding %table, %tokens : ...
    %o = nn.attention %q, %k, %v causal = true scale = 0.25 ring = true : ...
    ```
    After:
    ```mlir
    %c0 = nn.slice %tokens start = [0, 0] limit = [2, 4] : ...
    %c1 = nn.slice %tokens start = [0, 12] limit = [2, 16] : ...
    ...
    %z = nn.concat %c0, %c1, %c2, %c3 dim = 1 : ...
    %t = dist.sharding_constraint %z <@mesh, [{}, {"cp"} ]> : ...
    %x = nn.embedding %table, %t : ...
    %o = nn.attention %q, %k, %v causal = true scale = 0.25 ring = true
        zigzag = 2 : ...
    ```
  }];
  let dependentDialects = ["::tessera::nn::NNDialect",
                           "::tessera::dist::DistDialect"];
}

def SplitAxesPass : Pass<"tessera-split-axes", "mlir::ModuleOp"> {
  let summary = "Splits mesh axes into sub-axes for grouped-query attention";
  let description = [{
    Runs before `--tessera-propagate`. An axis of N devices that some
    `nn.attention` (or its gradient) with K kv heads could split the query
    heads over (N divides the heads) but not the kv heads (1 < K < N, K
    divides N) becomes two axes: its major part of K devices and its minor
    part of N / K, named as Shardy writes sub-axes. Every sharding and
    every list of axes names the parts instead of the axis, which splits
    the same devices, so nothing changes but what propagation can say: the
    kv heads split over the major part and each kv head's query heads over
    the minor part, each device reading its kv head whole (Megatron-LM's
    replicated kv heads). The axes "pp" and "mb" are never split, nor the
    axes of a module with several meshes.

    Before, with `nn.attention` of 8 query and 2 kv heads:
    ```mlir
    dist.mesh @mesh ["dp"=2, "tp"=4]
    %w: tensor<64x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"} ]>}
    ```
    After:
    ```mlir
    dist.mesh @mesh ["dp"=2, "tp:(1)2"=2, "tp:(2)2"=2]
    %w: tensor<64x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp:(1)2", "tp:(2)2"} ]>}
    ```
  }];
  let dependentDialects = ["::tessera::dist::DistDialect"];
}

def MergeAxesPass : Pass<"tessera-merge-axes", "mlir::ModuleOp"> {
  let summary = "Merges the sub-axes of --tessera-split-axes back where it can";
  let description = [{
    Runs after `--tessera-partition`. The sub-axes of an axis become the
    axis again when every sharding and list of axes in the module names
    them all, together and in order (`{"tp:(1)2", "tp:(2)2"}` is `{"tp"}`),
    or none of them. Where one is used alone (kv heads split over
    "tp:(1)2"), the mesh keeps them as axes of their own: a device has the
    same id either way, so the plan and the runtime need nothing more.
  }];
  let dependentDialects = ["::tessera::dist::DistDialect"];
}

def StripShardingPass : Pass<"tessera-strip-sharding", "mlir::ModuleOp"> {
  let summary = "Removes every sharding: the single-device program";
  let description = [{
    Drops the `dist.sharding` attributes of functions and ops, replaces each
    `dist.sharding_constraint` with its operand and erases the meshes. What
    is left is the program one device runs alone; `tessera verify` compares
    the sharded plan against it.
  }];
}

def MicrobatchPass : Pass<"tessera-microbatch", "mlir::ModuleOp"> {
  let summary = "Splits the batch into microbatches: a time axis \"mb\" of the mesh";
  let description = [{
    Runs before `--tessera-propagate` when a step is to be pipelined or to
    accumulate gradients. Adds the axis "mb" of size `microbatches` to the
    mesh as its most minor axis (making a mesh `@mesh ["mb"=M]` if there is
    none) and splits dim 0 (the batch) of every data argument (neither
    `nn.param` nor `nn.state`) over it, after the axes already there: each
    rank's microbatches are one after another in its piece. Where the
    batch splits over "ep" (expert parallelism), "mb" goes before the axes
    instead, so that "ep" stays the minor split of a microbatch, which the
    experts' all_to_all exchanges for experts; `--tessera-pipeline` marks
    such data `dist.microbatches_major`, and the runtime feeds each rank its
    piece of every microbatch, one after another.

    Microbatching is then sharding in time, as GSPMD would see it:
    propagation and partition give every value its one-microbatch local
    shape, and every value that combines microbatches (a parameter's
    gradient, the mean loss) becomes an all_reduce over "mb".
    `--tessera-pipeline` turns that axis into a loop over microbatches and
    those all_reduces into accumulation; until then the program is the
    ordinary SPMD program of a mesh with M times the devices.

    ```mlir
    // tessera-opt --tessera-microbatch=microbatches=4
    dist.mesh @mesh ["dp"=2, "mb"=4]
    func.func @step(%tokens: tensor<32x16xi32>
        {dist.sharding = #dist.sharding<@mesh, [{"dp", "mb"}, {} ]>}, ...)
    ```

    Fails when the mesh has an axis "mb" already or a batch does not divide
    by its axes times `microbatches`.
  }];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "Microbatches per step">,
  ];
  let dependentDialects = ["::tessera::dist::DistDialect"];
}

def PipelinePass : Pass<"tessera-pipeline", "mlir::ModuleOp"> {
  let summary = "Cuts a partitioned step into pipeline stages with a microbatch schedule";
  let description = [{
    Runs on a partitioned program (after `--tessera-microbatch`,
    `--tessera-propagate` and `--tessera-partition`) whose mesh has the axis
    "pp" of size `stages` (or none when `stages` is 1) and the axis "mb" of
    size `microbatches` (or none when it is 1). It replaces the function by
    one function per coordinate of "pp" (`dist.pipeline_rank`), each the
    program of its stage, and removes the axis "mb".

    1. Classes. Ops that depend on no data argument are *pre* ops (weight
       casts, constants): each stage that needs one computes it once.
       Optimizer updates and all that follows an all_reduce over "mb" are
       *post* ops: they run once, after the microbatches. The rest, the
       *body*, runs once per microbatch: *forward* ops (those the loss
       depends on) and *backward* ops.
    2. Cuts. `stages × virtual` stages are cut from the forward ops in
       program order. Where ops carry `dist.stage = k`, stage k starts at the
       first of them (the annotations must not decrease); otherwise the cuts
       are chosen among the places where one forward value crosses (the
       boundaries between layers) by dynamic programming that balances the
       stages' FLOPs. A backward op runs in the latest stage reading its
       forward operands; one that reads none, in the earliest of its
       gradient operands' stages and the stage reading the weights it reads
       (dX = dY W^T runs with W); a view of a gradient runs where it is
       read. Stage k runs on pipeline rank k mod `stages`.
    3. Transfers. A body value that another stage reads is sent there
       (`dist.send` on the communication stream, tag per value and
       microbatch) and received (`dist.recv`) at the start of the reader's
       unit. Each send completes at a `dist.wait` placed where the receive is
       known to have been posted (found by simulating the schedule), or at
       the end.
    4. Schedule. Each rank runs units F(k, m) (the forward of stage k on
       microbatch m) and B(k, m) in the order of `schedule`:
       `gpipe` runs all forwards, then all backwards; `1f1b` runs
       `stages - rank - 1` forwards of warm-up, then one forward and one
       backward in turn, then the remaining backwards; `interleaved` is
       Megatron-LM's interleaved 1F1B over `virtual` stages per rank
       (microbatches a multiple of `stages`); `zb-h1` (zero bubble, Qi et
       al. 2023) is 1F1B with each backward split into B(k, m), the ops
       that make the gradients another stage reads, and W(k, m), the rest
       (weight gradients): rank r runs W(k, m) after the B of microbatch
       m + r and its last r Ws at the end, so that Ws fill the waits for
       the next rank's gradient (a third of 1F1B's bubble when F = B = W).
       `2bw` (PipeDream-2BW, Narayanan et al. 2021) is 1F1B without a flush
       between steps, on a step whose forward and backward read the weights
       of the step before (`--tessera-weight-stash`): rank r's warm-up
       forward k alternates with the step before's backward
       m - (stages - r - 1) + k (`entry_steps` -1), after which it updates
       that step (`post_after`); the last rank updates at the end of the
       run. A run thus finishes the step before, the first run skips what
       it has none of, and the runtime drains the last. The post ops split
       in two parts (the first op of each named "update" and
       "deferred-update"): on a rank with backwards of the step before, all
       of them are deferred (for that step, after its last such backward)
       but the waits for their sends (at the end); on the last rank, those
       that read another rank's sum (a parameter tied across stages, as a
       GPT's embedding and LM head) are deferred to the next run, so that
       neither rank waits for the other's sum, and the rest run at the end.
       Microbatches must be at least `stages`; a gradient norm over all
       stages and a forward sum on any rank but the last are refused. Pre
       ops that read arguments are made in each unit and part that reads
       them (a run holds two steps' weights and data), and each microbatch
       has its own slot.
    5. Accumulation. Each all_reduce over "mb" becomes the sum of its
       operand over microbatches, made as each microbatch's value appears
       (divided by `microbatches` for avg), followed by the all_reduce over
       its remaining axes; a sum only so reduced is summed after (its terms
       accumulate where they are made). Post ops run on every rank that
       holds the parameter they update (a parameter tied across stages, such as GPT's
       embedding, is updated identically on each), receiving the
       accumulated values they read from other ranks. State that every
       stage reads (dynamic loss scaling's scale) is updated on each.
    6. Gradient norms (`--tessera-clip-gradients`: the `nn.sqrt` marked
       `tessera.global_norm`, of a sum of `nn.sum_squares` that the updates
       read) are post ops. Each term runs where the updates of its gradient
       run, so no gradient moves for it; each rank sums the terms it is the
       first to make (within the stage as the partitioner summed them), and
       one all_reduce over "pp" adds the ranks' sums before the square root.

    Data arguments become one local batch of all microbatches (microbatch m
    is rows [m·b, (m+1)·b) of it); each stage's arguments and results keep
    their index in the cut function in `dist.source_index`.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"1",
           "Pipeline ranks (the size of mesh axis \"pp\")">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "Microbatches per step (the size of mesh axis \"mb\")">,
    Option<"schedule", "schedule", "::tessera::PipelineSchedule",
           /*default=*/"::tessera::PipelineSchedule::OneFOneB",
           "The microbatch schedule",
           [{::tessera::enumValues(::tessera::kPipelineScheduleNames)}]>,
    Option<"virtualStages", "virtual", "int64_t", /*default=*/"1",
           "Stages per rank (interleaved)">,
  ];
  let dependentDialects = ["::tessera::dist::DistDialect",
                           "::tessera::nn::NNDialect"];
}

def FuseElementwisePass : Pass<"tessera-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Fuses chains of elementwise ops into one pass over memory";
  let description = [{
    Groups producer–consumer chains of elementwise ops of one shape into
    `nn.fused` ops, as XLA's loop fusion and Inductor's pointwise fusion do,
    so that a backend reads each input and writes each result once instead
    of once per op: a GELU and its gradient, a bias add and its activation,
    residual adds, masks. Splat constants and broadcasts of other values
    that a chain reads are copied into it (a broadcast becomes a strided
    read), so neither is made in memory for it.

    The ops of a group run where its last op ran, so an op joins a group
    only while no op outside it has read the group's values since; a value
    also read outside becomes a result of the fused op. A group never spans
    an op outside the `nn` dialect (a collective, a wait, a send or receive)
    nor the first op of a pipeline unit, so the schedules of
    `--tessera-schedule` and `--tessera-pipeline` stand as they were. A
    group holds at most 64 ops and 16 broadcasts and reads at most 16
    inputs (what the CUDA backend passes to one kernel); one op alone stays
    as it is. Each
    element is computed by the same ops in the same order, so `tessera
    verify` stays exact.

    ```mlir
    // Before:
    %b2 = nn.broadcast %b dims = [1] : tensor<64xf32> -> tensor<8x64xf32>
    %h = nn.add %x, %b2 : tensor<8x64xf32>
    %y = nn.gelu %h : tensor<8x64xf32>
    // After:
    %y = nn.fused(%x, %b) : (tensor<8x64xf32>, tensor<64xf32>)
        -> tensor<8x64xf32> {
    ^bb0(%x0: tensor<8x64xf32>, %b0: tensor<64xf32>):
      %0 = nn.broadcast %b0 dims = [1] : tensor<64xf32> -> tensor<8x64xf32>
      %1 = nn.add %x0, %0 : tensor<8x64xf32>
      %2 = nn.gelu %1 : tensor<8x64xf32>
      nn.yield %2 : tensor<8x64xf32>
    }
    ```
  }];
  let dependentDialects = ["::tessera::nn::NNDialect"];
}

def ExportPass : Pass<"tessera-export", "mlir::ModuleOp"> {
  let summary = "Writes a partitioned program as an executable plan";
  let description = [{
    Turns the one function of the module (partitioned by
    `--tessera-partition`, or a program without shardings, which becomes a
    one-device plan) into the versioned protobuf plan of
    `runtime/proto/plan.proto` that `tessera-run` executes:

    - every SSA value becomes a numbered buffer with its local shape;
    - `nn.reshape` becomes a view: a buffer of the new shape over its
      operand's bytes (`view_of`), with no instruction and no copy; the
      operand lives as long as its views are read. So does an `nn.slice`
      of a contiguous run of its operand's elements (a gathered flat
      piece cut to its elements, a unit's member in its gathered buffer),
      from its first byte (`view_offset_bytes`);
    - a splat `nn.constant` that only kernels read is made again right
      before each of them, so that it lives for that kernel alone (outside
      a pipeline stage, whose units the pipeline pass makes them in);
    - an `nn.concat` along dim 0 finds in place each input made for it
      alone (read last there, not an argument, not shared): its buffer is
      placed in the result's (`placed_in`, `placed_offset_bytes`), which
      lives from the first such input's making, so a unit's gradient costs
      no copy; a concatenation with zeros (a padding) is written over its
      value (`overwrites`);
    - every other `nn` op becomes a kernel launch with its attributes, every `dist`
      collective a collective on its mesh-axis group; an `nn.fused` op
      becomes one kernel whose steps (`fused_steps`) are its body's ops
      with their attributes and element types, over values numbered from
      the kernel's inputs on, and whose outputs are the yielded values
      (`fused_results`);
    - each buffer is freed after its last use, and a static memory plan
      places all buffers in one arena per device; the plan reports its peak
      (`arena_bytes`);
    - arguments and results record their global shape and how the local
      piece sits in it (their mesh axes per dim), parameters their `nn.param`
      name, and integer data arguments the bound of their values (the vocab
      of the embedding or cross-entropy that reads them).

    Any other op is an error. The module is not changed.
  }];
  let options = [
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the plan ('-': standard output)">,
    Option<"text", "text", "bool", /*default=*/"false",
           "Write protobuf text format instead of binary (for reading)">,
  ];
}

#endif // TESSERA_TRANSFORMS_PASSES
